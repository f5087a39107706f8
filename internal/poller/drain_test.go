package poller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSleepAfterArmSkipsDrain: a wait that arms the CQ and finds nothing
// sleeps without reading the channel first (the read could only say
// EAGAIN), so each wake-up costs one drain, not two; and no wake-up is
// lost by it.
func TestSleepAfterArmSkipsDrain(t *testing.T) {
	t.Setenv(eagerDrainEnv, "")
	q := newFakeCQ(t)
	w := newWaiter(t, q, 0)
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
	// One drain per wake (the event it read); the old pattern drained
	// before each sleep too: 2 per round.
	require.LessOrEqual(t, q.drains.Load(), int64(rounds+rounds/10), "drains in %d rounds", rounds)
	require.Equal(t, int64(rounds), q.arms.Load(), "arms")
}

// TestEagerDrainKeepsOldPattern: RDMANET_POLLER_DRAIN=eager drains before
// each sleep as before (the benchmark's baseline row relies on it).
func TestEagerDrainKeepsOldPattern(t *testing.T) {
	t.Setenv(eagerDrainEnv, "eager")
	q := newFakeCQ(t)
	w := newWaiter(t, q, 0)
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
