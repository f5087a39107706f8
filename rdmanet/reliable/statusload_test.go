//go:build linux

package reliable

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Members that do not write stay known to each other by their
// heartbeats, not by status reports to every member every
// ReceiverTimeout/4: among m members that is m(m-1) reports each
// quarter, the O(m^2) chatter that took a third of the CPU of 64
// receivers in one process. Over four ReceiverTimeouts of heartbeats
// every member still counts the others, and the reports sent stay near
// one per pair per ReceiverTimeout (four per pair before).
func TestIdleMembersStayKnownByHeartbeats(t *testing.T) {
	const m = 6
	// ReceiverTimeout 200 ms: a member stalled past it forgets the
	// others, and under the VM's emulated CPUs (make test-rxe) stalls of
	// tens of ms come and go.
	const rt = 200 * time.Millisecond
	group := newGroup()
	cfg := Config{HeartbeatMax: rt / 10, ReceiverTimeout: rt}
	cs := make([]*Conn, m)
	for i := range cs {
		cs[i] = listenT(t, group, cfg)
	}
	for _, c := range cs {
		waitKnown(t, c, m-1)
	}
	sent := func() (n uint64) {
		for _, c := range cs {
			n += c.Stats().StatusSent
		}
		return n
	}
	before, start := sent(), time.Now()
	hb := cs[0].Stats().Heartbeats
	deadline := start.Add(30 * time.Second)
	for cs[0].Stats().Heartbeats < hb+40 { // 40 x rt/10: four ReceiverTimeouts
		require.True(t, time.Now().Before(deadline), "40 heartbeats in 30 s")
		time.Sleep(time.Millisecond)
	}
	took := time.Since(start)
	for i, c := range cs {
		require.Equal(t, m-1, c.Receivers(), "member %d after %v", i, took)
	}
	pairs := uint64(m * (m - 1))
	bound := pairs * (uint64(took/rt) + 2)
	got := sent() - before
	t.Logf("%d reports among %d members in %v (bound %d; a report every ReceiverTimeout/4 would be %d)", got, m, took, bound, pairs*uint64(4*took/rt))
	require.LessOrEqual(t, got, bound)
}
