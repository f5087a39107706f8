//go:build linux && cgo

package rdmacore_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/internal/verbs/rdmacore"
)

// TestDeviceJoinWaitFailureLeavesNothingPending: a Join whose wait for
// the event channel fails returns that error and leaves no pending entry
// behind (one pump would fill for a join nobody waits for). A Join whose
// MULTICAST_JOIN is there at its first look never waits: it succeeds and
// is left, and the next group is tried, until three Joins have failed in
// their wait.
func TestDeviceJoinWaitFailureLeavesNothingPending(t *testing.T) {
	d := needDevice(t)
	e := newEndpoint(t, d, verbs.QPConfig{})
	errWait := errors.New("injected event channel wait failure")
	rdmacore.FailJoinWaits(t, errWait)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const tries = 50
	failed := 0
	for i := 0; i < tries && failed < 3; i++ {
		g := verbs.Group{IP: net.IPv4(239, 1, 61, byte(i+1))}
		m, err := e.id.Join(ctx, g, verbs.JoinOptions{})
		if err == nil {
			require.NoError(t, e.id.Leave(m.MGID), "leave %s", g.IP)
		} else {
			require.ErrorIs(t, err, errWait, "join %s", g.IP)
			failed++
		}
		require.Zero(t, rdmacore.PendingJoins(e.id), "pending joins after the Join of %s returned (err %v)", g.IP, err)
	}
	require.NotZero(t, failed, "none of %d Joins reached its wait: each MULTICAST_JOIN was there at the first look", tries)
}

// TestDeviceJoinCanceledLeavesNothingPending: a Join given up on because
// its context is done leaves no pending entry behind either.
func TestDeviceJoinCanceledLeavesNothingPending(t *testing.T) {
	d := needDevice(t)
	e := newEndpoint(t, d, verbs.QPConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := 0; i < 10; i++ {
		g := verbs.Group{IP: net.IPv4(239, 1, 62, byte(i+1))}
		m, err := e.id.Join(ctx, g, verbs.JoinOptions{})
		if err == nil { // the MULTICAST_JOIN was there at the first look
			require.NoError(t, e.id.Leave(m.MGID), "leave %s", g.IP)
		} else {
			require.ErrorIs(t, err, context.Canceled, "join %s", g.IP)
		}
		require.Zero(t, rdmacore.PendingJoins(e.id), "pending joins after the Join of %s returned (err %v)", g.IP, err)
	}
}
