package reliable

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// A FlowMin write waiting on a full receive window goes as soon as the
// receiver has room for exactly it: the receiver reads one message of
// the 64 its window holds, its status says one more (next + RecvWindow),
// and the 65th write, which fills that room to the last slot, is
// released. Nothing else is read, so a writer that wanted room to spare
// would wait until its deadline.
func TestFlowMinReleasedAtExactRoom(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{MaxMessage: 8 << 10, RecvWindow: 64, StatusInterval: 200 * time.Microsecond})
	tx := listenT(t, group, Config{MaxMessage: 8 << 10, FlowControl: FlowMin, Window: 64, ReceiverTimeout: time.Hour})
	waitReceivers(t, tx, 1)
	writeN(t, tx, group, 0, 64, 64)
	require.Zero(t, tx.Stats().FlowControlWaits, "64 writes into a window of 64")

	tx.SetWriteDeadline(time.Now().Add(10 * time.Second))
	done := make(chan error, 1)
	go func() {
		_, err := tx.WriteTo(payload(make([]byte, 64), 64), group)
		done <- err
	}()
	waitStat(t, tx, "flow-control waits", func(s Stats) uint64 { return s.FlowControlWaits }, 1)
	require.Zero(t, readOne(t, r, 64))
	select {
	case err := <-done:
		require.NoError(t, err, "the write released by room for exactly it")
	case <-time.After(15 * time.Second):
		t.Fatal("no return of the write in 15 s")
	}
	require.Equal(t, uint64(1), tx.Stats().FlowControlWaits)
	for i := uint64(1); i <= 64; i++ {
		require.Equal(t, i, readOne(t, r, 64))
	}
}

// A receiver heard exactly ReceiverTimeout ago still holds a FlowMin
// sender back (Receivers counts it so too, and the sweep keeps it); a
// nanosecond later it no longer does. slowest is asked at those two
// instants, an hour after the receiver's status, so the conn's own
// sweeps leave it alone.
func TestSlowestKeepsReceiverAtReceiverTimeout(t *testing.T) {
	const rt = time.Hour
	tx := listenT(t, newGroup(), Config{MaxMessage: 8 << 10, FlowControl: FlowMin, Window: 64, ReceiverTimeout: rt})
	inject(tx, statusDG(0x78, tx.session, 10, 50), rdmanet.Addr{QPN: 0x4322}) // room up to 50, under 10 + Window
	s := &tx.snd
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Len(t, s.receivers, 1)
	var heard int64
	for _, r := range s.receivers {
		heard = r.heard
	}
	lim, ok := s.slowest(heard + int64(rt))
	require.True(t, ok, "a receiver heard ReceiverTimeout ago no longer holds the sender back")
	require.Equal(t, uint64(50), lim, "how far the sender may write")
	_, ok = s.slowest(heard + int64(rt) + 1)
	require.False(t, ok, "a receiver heard ReceiverTimeout and 1 ns ago still holds the sender back")
}
