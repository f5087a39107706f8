//go:build linux

package poller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The skip after each miss in a row, from the first: none for the first
// spinMissesBeforeBackoff-1, then 1, 2, 4 ... doubling up to
// 1<<maxSpinBackoffShift (64), and no further.
func TestSpinBackoffDoublesToItsCap(t *testing.T) {
	q := newFakeCQ(t)
	w := newWaiter(t, q, time.Nanosecond)
	var skips []int
	for range 13 {
		n, err := w.spinPoll()
		require.NoError(t, err)
		require.Zero(t, n, "a spin over an empty CQ found %d", n)
		skips = append(skips, w.skip)
		w.skip = 0
	}
	require.Equal(t, []int{0, 0, 0, 1, 2, 4, 8, 16, 32, 64, 64, 64, 64}, skips)
}

// A deadline cleared (the zero time) no longer bounds the spin: the next
// spinning wait finds a completion within its window, without arming.
func TestClearedDeadlineLeavesSpinWindow(t *testing.T) {
	q := newFakeCQ(t)
	w := newWaiter(t, q, 10*time.Second)
	require.NoError(t, w.SetDeadline(time.Now().Add(time.Hour)))
	require.NoError(t, w.SetDeadline(time.Time{}))
	res := waitAsync(w)
	require.Eventually(t, func() bool { return q.polls.Load() >= 3 || q.arms.Load() > 0 }, waitBound, 100*time.Microsecond, "the wait never polled")
	require.Zero(t, q.arms.Load(), "the wait armed instead of spinning")
	q.mu.Lock()
	q.pending++ // no event: only a poll finds it
	q.mu.Unlock()
	r := resultWithin(t, res, "spinning Wait after the deadline was cleared")
	require.NoError(t, r.err)
	require.Equal(t, 1, r.n)
	require.Zero(t, q.arms.Load(), "the wait stopped spinning and armed")
}

// Any spin window, however short, polls at least once before the wait
// arms the CQ: a 1 ns window polls once in its spin, then the wake-up
// protocol polls, arms and polls again.
func TestShortestSpinWindowPollsOnce(t *testing.T) {
	q := newFakeCQ(t)
	w := newWaiter(t, q, time.Nanosecond)
	res := waitAsync(w)
	require.Eventually(t, func() bool { return q.arms.Load() == 1 }, waitBound, 100*time.Microsecond, "the wait never armed")
	require.Equal(t, int64(2), q.pollsAtArm.Load(), "polls before the arm: one in the spin, one before arming")
	q.post(1)
	r := resultWithin(t, res, "Wait after a 1 ns spin")
	require.NoError(t, r.err)
	require.Equal(t, 1, r.n)
}
