//go:build linux

package rdmanet_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/rdmanet"
)

// A rejoin after MULTICAST_ERROR whose joins fail backs off
// exponentially: 10 ms, then double each time. (Not parallel: it
// replaces the back-off's timer for every conn.)
func TestRejoinBackoffDoubles(t *testing.T) {
	softOnly(t)
	waits, restore := rdmanet.ObserveRejoinWaits()
	t.Cleanup(restore)
	g := newGroup()
	c := listen(t, g, func(lc *rdmanet.ListenConfig) { lc.Backend = rdmanet.BackendFailingRetries })
	ga, err := c.GroupAddr(g)
	require.NoError(t, err)
	rdmanet.FailJoins(c, 4)
	require.NoError(t, rdmanet.InjectRetryEvent(c, verbs.Event{Type: verbs.EventMulticastError, MGID: ga.GID}))
	require.Eventually(t, func() bool { return c.Stats().Rejoins == 1 }, 5*time.Second, time.Millisecond,
		"waiting for the rejoin after four failed joins")
	ms := time.Millisecond
	require.Equal(t, []time.Duration{10 * ms, 20 * ms, 40 * ms, 80 * ms}, waits(), "the back-offs between the joins")
}

// A QP reset that fails is tried again RecoverRetry later, not more.
// (Not parallel: it replaces recoverLoop's timer for every conn.)
func TestRecoverRetryAfterFailedReset(t *testing.T) {
	softOnly(t)
	waits, restore := rdmanet.ObserveRecoverWaits()
	t.Cleanup(restore)
	c := listen(t, newGroup(), func(lc *rdmanet.ListenConfig) { lc.Backend = rdmanet.BackendFailingRetries })
	rdmanet.FailResets(c, 1)
	require.NoError(t, rdmanet.InjectRetryEvent(c, verbs.Event{Type: verbs.EventQPError}))
	require.Eventually(t, func() bool { return c.Stats().Recoveries == 1 }, 5*time.Second, time.Millisecond,
		"waiting for the reset after one failed try")
	ws := waits()
	require.NotEmpty(t, ws, "recoverLoop waited after the failed reset")
	for i, w := range ws {
		require.LessOrEqual(t, w, rdmanet.RecoverRetry, "wait %d of %v", i, ws)
	}
}

// A QP reset that fails is tried again 100 ms later (ErrQPError's doc),
// at that very instant: with the reset's clock pinned, recoverLoop waits
// 100 ms once, and the next try resets the QP. (Not parallel: it
// replaces recoverLoop's clock and timer for every conn.)
func TestFailedResetTriedAgainAfter100ms(t *testing.T) {
	softOnly(t)
	waits, restore := rdmanet.PinRecoverClock()
	t.Cleanup(restore)
	c := listen(t, newGroup(), func(lc *rdmanet.ListenConfig) { lc.Backend = rdmanet.BackendFailingRetries })
	rdmanet.FailResets(c, 1)
	require.NoError(t, rdmanet.InjectRetryEvent(c, verbs.Event{Type: verbs.EventQPError}))
	require.Eventually(t, func() bool { return c.Stats().Recoveries == 1 }, 5*time.Second, time.Millisecond,
		"waiting for the reset after one failed try")
	require.Equal(t, []time.Duration{100 * time.Millisecond}, waits(),
		"recoverLoop's waits: one of 100 ms after the failed reset, then the reset")
}
