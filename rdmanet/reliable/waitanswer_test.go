//go:build linux

package reliable

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A FlowMin sender whose write waits for room, when the report that gave
// the room was lost and the receiver has nothing more to read (so no
// position or room moves to report again), is freed by the receiver's
// answer to its waiting heartbeats (flagWait), within a few
// StatusIntervals, not by the keep-alive a quarter of ReceiverTimeout
// later (15 s here). The sender's hook drops every report with a room in
// (rw, 2rw) and the first with room 2rw: the sender stays at rw, the
// receiver reads all rw and reports room 2rw once, lost. Without the
// answer the write below runs into its 3 s deadline.
func TestWaitingSenderAnsweredAfterLostStatus(t *testing.T) {
	const rw = 16
	group := newGroup()
	cfg := Config{MaxMessage: 256, RecvWindow: rw, StatusInterval: time.Millisecond, ReceiverTimeout: time.Minute}
	var dropped, lastLost atomic.Int64
	hook := func(b []byte) bool {
		var h header
		p, err := decode(b, &h)
		if err != nil || h.kind != kindStatus || len(p) < statusPayload {
			return false
		}
		_, lim := parseStatus(p)
		switch {
		case lim > rw && lim < 2*rw:
		case lim == 2*rw && lastLost.CompareAndSwap(0, 1):
		default:
			return false
		}
		dropped.Add(1)
		return true
	}
	rx := listenT(t, group, cfg)
	txCfg := cfg
	txCfg.FlowControl = FlowMin
	tx := listenDrop(t, group, txCfg, hook)
	waitKnown(t, tx, 1)

	read := make(chan error, 1)
	go func() {
		losses, err := readAll(rx, rw+1, 64, 10*time.Second)
		if err == nil && losses != 0 {
			err = fmt.Errorf("%d messages reported lost", losses)
		}
		read <- err
	}()
	b := make([]byte, 64)
	for i := range uint64(rw) {
		_, err := tx.WriteTo(payload(b, i), group)
		require.NoError(t, err, "write %d: within the room of the first report", i)
	}
	require.NoError(t, tx.SetWriteDeadline(time.Now().Add(3*time.Second)))
	start := time.Now()
	_, err := tx.WriteTo(payload(b, rw), group)
	require.NoError(t, err, "the write past the lost report's room; sender %+v", tx.Stats())
	t.Logf("the write waited %v for the answer; %d reports dropped", time.Since(start), dropped.Load())
	require.NoError(t, <-read)
	require.Equal(t, int64(1), lastLost.Load(), "the receiver's report of room %d was dropped", 2*rw)
	require.NotZero(t, tx.Stats().FlowControlWaits, "the write waited for the receiver")
}
