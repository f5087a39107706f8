//go:build linux

package poller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestSleepAfterArmSkipsDrain: a wait that arms the CQ and finds nothing
// sleeps without reading the channel first (the read could only say
// EAGAIN), so each wake-up costs one drain, not two; and no wake-up is
// lost by it.
func TestSleepAfterArmSkipsDrain(t *testing.T) {
	for _, mk := range makers {
		t.Run(mk.name, func(t *testing.T) { testSleepAfterArmSkipsDrain(t, mk.make) })
	}
}

func testSleepAfterArmSkipsDrain(t *testing.T, mk func(testing.TB, *fakeCQ) *Waiter) {
	setEagerDrain(t, false)
	q := newFakeCQ(t)
	w := mk(t, q)
	const rounds = 20
	for i := 1; i <= rounds; i++ {
		done := make(chan error, 1)
		go func() { _, err := w.Wait(); done <- err }()
		require.Eventually(t, func() bool { return q.arms.Load() == int64(i) }, 5*time.Second, time.Millisecond)
		time.Sleep(2 * time.Millisecond) // let the wait go to sleep
		q.post(1)
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: wait not woken by a completion after the arm", i)
		}
	}
	// One drain per wake (the event it read); the eager pattern drains
	// before each sleep too: 2 per round.
	require.LessOrEqual(t, q.drains.Load(), int64(rounds+rounds/10), "drains in %d rounds", rounds)
	require.Equal(t, int64(rounds), q.arms.Load(), "arms")
}

// TestEagerDrainDrainsBeforeSleep: with SetEagerDrain on, a Waiter drains
// before each sleep (the benchmark's baseline rows rely on it).
func TestEagerDrainDrainsBeforeSleep(t *testing.T) {
	for _, mk := range makers {
		t.Run(mk.name, func(t *testing.T) { testEagerDrainDrainsBeforeSleep(t, mk.make) })
	}
}

// makers make a Waiter on a fakeCQ both ways: New (a dup of the fd) and
// Adopt (the fd itself, here a dup the test makes); each takes
// SetEagerDrain's setting.
var makers = []struct {
	name string
	make func(testing.TB, *fakeCQ) *Waiter
}{
	{"New", func(t testing.TB, q *fakeCQ) *Waiter { return newWaiter(t, q, 0) }},
	{"Adopt", func(t testing.TB, q *fakeCQ) *Waiter {
		fd, err := unix.Dup(q.efd)
		require.NoError(t, err)
		w, err := Adopt(fd, "fakecq-adopted", q, 0)
		require.NoError(t, err)
		t.Cleanup(func() { w.Close() })
		return w
	}},
}

func testEagerDrainDrainsBeforeSleep(t *testing.T, mk func(testing.TB, *fakeCQ) *Waiter) {
	setEagerDrain(t, true)
	q := newFakeCQ(t)
	w := mk(t, q)
	done := make(chan error, 1)
	go func() { _, err := w.Wait(); done <- err }()
	require.Eventually(t, func() bool { return q.drains.Load() >= 1 }, 5*time.Second, time.Millisecond,
		"no drain before the sleep")
	q.post(1)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(waitBound):
		t.Fatalf("eager drain: Wait not woken by a completion within %v (a lost wake-up)", waitBound)
	}
}

// setEagerDrain sets SetEagerDrain's setting for the Waiters the test
// makes, and puts the previous one back when it ends.
func setEagerDrain(t *testing.T, on bool) {
	was := SetEagerDrain(on)
	t.Cleanup(func() { SetEagerDrain(was) })
}
