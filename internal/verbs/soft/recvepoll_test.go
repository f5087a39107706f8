//go:build linux

package soft_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/internal/verbs/soft"
)

// The unicast watch kicks a waiter that sleeps narrow only when the
// unicast socket has datagrams (watchUnicast's comment: a kick costs the
// waiter a wake and a Poll): its first check, as the watch starts with
// nothing sent, kicks no one; a unicast datagram then kicks.
func TestUnicastWatchKicksOnlyForDatagrams(t *testing.T) {
	a := newEndpoint(t, verbs.QPConfig{})
	s := newEndpoint(t, verbs.QPConfig{})
	kk := soft.RecvWaiterHooksOf(a.qp)
	require.True(t, kk.Narrow(), "narrow before any unicast")
	checks, restore := soft.CountWatchChecks()
	defer restore()
	var k kicks
	require.NoError(t, kk.SetKick(k.kick)) // starts the watch
	deadline := time.Now().Add(2 * time.Second)
	for checks() == 0 {
		require.True(t, time.Now().Before(deadline), "the watch made no first check")
		time.Sleep(time.Millisecond)
	}
	require.Zero(t, k.n.Load(), "kicks from a check with nothing sent")
	ah, err := s.qp.CreateAH(verbs.AHAttr{DGID: a.id.Local().GID, IsGlobal: true, HopLimit: 64})
	require.NoError(t, err)
	s.send(ah, a.qp.QPN(), []byte("u"), 0, 0)
	require.True(t, k.waitFor(t, 1, 2*time.Second), "a unicast datagram did not kick")
}
