package reliable

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-rdma/rdmanet/rdmanet"
	"github.com/stretchr/testify/require"
)

// Close of a conn that sent, with no receiver known, lingers four status
// intervals for one to speak up (Linger is longer), and no more: here
// 3 s, bounded at 3.6 s (five intervals would be 3.75 s).
func TestCloseLingersForUnknownReceivers(t *testing.T) {
	group := newGroup()
	const si = 750 * time.Millisecond
	c := listenT(t, group, Config{Linger: 30 * time.Second, StatusInterval: si})
	writeN(t, c, group, 0, 1, 64)
	start := time.Now()
	require.NoError(t, c.Close())
	took := time.Since(start)
	t.Logf("Close took %v", took)
	require.GreaterOrEqual(t, took, 4*si, "Close with no receiver known")
	require.Less(t, took, 4*si+600*time.Millisecond, "Close with no receiver known")
}

// With short status intervals the wait for an unknown receiver is at
// least 5 ms, and no more: here four intervals are 400 µs. The linger
// loop backs off its polls to 6.4 ms, so a goroutine wakes it over and
// over (as statuses would; a timer would wake it only every 1 ms or so)
// to have it look at the clock just after 5 ms. Each linger takes 5 ms at
// least; one of up to 100 must end before 6 ms, which a floor of 6 ms
// never could, the others having been late on a loaded machine.
func TestLingerForUnknownReceiversFloor(t *testing.T) {
	const floor = 5 * time.Millisecond
	c := listenT(t, newGroup(), Config{StatusInterval: 100 * time.Microsecond})
	writeN(t, c, c.groupArg, 0, 1, 64)
	var stop atomic.Bool
	done := make(chan struct{})
	defer func() { stop.Store(true); <-done }()
	go func() {
		defer close(done)
		for !stop.Load() {
			c.snd.wake()
			runtime.Gosched()
		}
	}()
	var took []time.Duration
	for range 100 {
		start := time.Now()
		c.snd.linger()
		d := time.Since(start)
		require.GreaterOrEqual(t, d, floor, "got a linger of %v with no receiver known, want %v at least", d, floor)
		took = append(took, d)
		if d < floor+time.Millisecond {
			t.Logf("lingers of %v", took)
			return
		}
	}
	t.Fatalf("got lingers of %v with no receiver known, want one under %v", took, floor+time.Millisecond)
}

// With its one receiver known and up to date, linger ends at its first
// look, after one fin heartbeat: one receiver is a known receiver, and
// the wait for an unknown one (four status intervals, here 20 s) is not
// taken.
func TestLingerEndsWithOneReceiverUpToDate(t *testing.T) {
	group := newGroup()
	c := listenT(t, group, Config{Linger: 20 * time.Second, StatusInterval: 5 * time.Second, ReceiverTimeout: time.Hour})
	writeN(t, c, group, 0, 1, 64)
	c.snd.mu.Lock()
	next := c.snd.next
	c.snd.mu.Unlock()
	inject(c, statusDG(0x77, c.session, next, next+64), rdmanet.Addr{QPN: 0x4321})
	require.Equal(t, 1, c.Receivers(), "the receiver known by its status")
	before := c.Stats().Heartbeats
	start := time.Now()
	c.snd.linger()
	took := time.Since(start)
	t.Logf("linger took %v", took)
	require.Less(t, took, 10*time.Second, "linger with its one receiver up to date (the wait for an unknown receiver is 20 s)")
	require.Greater(t, c.Stats().Heartbeats, before, "the fin heartbeat")
}
