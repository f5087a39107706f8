//go:build linux

package poller

import (
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A spin window never outlives the deadline, Close, Stop or Wake: each
// ends a spinning wait within a poll of it. The window is 2 s, so a wait
// that ran its window out (as before) fails every bound below by far.
const longSpin = 2 * time.Second

// spinning waits until the wait has polled: it is in its spin.
func spinning(t *testing.T, q *fakeCQ) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for q.polls.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the wait never polled")
		}
		time.Sleep(50 * time.Microsecond)
	}
}

func TestSpinEndsAtDeadline(t *testing.T) {
	q := newFakeCQ(t)
	w := newWaiter(t, q, longSpin)
	const d = 20 * time.Millisecond
	require.NoError(t, w.SetDeadline(time.Now().Add(d)))
	res := waitAsync(w)
	r := <-res
	require.ErrorIs(t, r.err, os.ErrDeadlineExceeded)
	require.GreaterOrEqual(t, r.at, d-time.Millisecond, "returned before the deadline")
	require.Less(t, r.at, d+300*time.Millisecond, "a %v deadline returned after %v (spin window %v)", d, r.at, longSpin)
	t.Logf("deadline %v: returned after %v", d, r.at)
}

func TestSpinEndsAtDeadlineSetDuringSpin(t *testing.T) {
	q := newFakeCQ(t)
	w := newWaiter(t, q, longSpin)
	res := waitAsync(w)
	spinning(t, q)
	set := time.Now()
	require.NoError(t, w.SetDeadline(set.Add(-time.Second)))
	r := <-res
	require.ErrorIs(t, r.err, os.ErrDeadlineExceeded)
	require.Less(t, time.Since(set), 300*time.Millisecond, "a past deadline set during the spin")
}

func TestSpinEndsAtClose(t *testing.T) {
	q := newFakeCQ(t)
	w, err := New(q.efd, "fakecq", q, longSpin)
	require.NoError(t, err)
	res := waitAsync(w)
	spinning(t, q)
	closed := time.Now()
	require.NoError(t, w.Close())
	r := <-res
	require.ErrorIs(t, r.err, net.ErrClosed)
	require.Less(t, time.Since(closed), 300*time.Millisecond, "Close during the spin: the wait returned after %v", time.Since(closed))
}

func TestSpinEndsAtStopAndWake(t *testing.T) {
	q := newFakeCQ(t)
	w := newWaiter(t, q, longSpin)

	res := waitAsync(w)
	spinning(t, q)
	woke := time.Now()
	w.Wake()
	r := <-res
	require.NoError(t, r.err)
	require.Zero(t, r.n)
	require.Less(t, time.Since(woke), 300*time.Millisecond, "Wake during the spin")

	q.polls.Store(0)
	res = waitAsync(w)
	spinning(t, q)
	stopped := time.Now()
	w.Stop()
	r = <-res
	require.ErrorIs(t, r.err, net.ErrClosed)
	require.Less(t, time.Since(stopped), 300*time.Millisecond, "Stop during the spin")
}
