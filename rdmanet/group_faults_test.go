//go:build linux

package rdmanet_test

import (
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/ipoib"
	"github.com/go-rdma/rdmanet/rdmanet"
)

// A JoinGroup whose join fails returns the join's error and joins
// nothing; so does one whose group's address handle cannot be made.
// Both can be joined once the fault is gone.
func TestJoinGroupFailsWhereItsVerbsFail(t *testing.T) {
	softOnly(t)
	t.Parallel()
	var failJoin, failAH atomic.Bool
	f := rdmanet.Faults{
		Join: func(verbs.Group) error {
			if failJoin.Load() {
				return errFault
			}
			return nil
		},
		CreateAH: func(verbs.AHAttr) error {
			if failAH.Load() {
				return errFault
			}
			return nil
		},
	}
	c := listen(t, nil, func(lc *rdmanet.ListenConfig) { lc.Backend = faults(t, &f) })
	for _, fail := range []*atomic.Bool{&failJoin, &failAH} {
		g := newGroup()
		fail.Store(true)
		err := c.JoinGroup(nil, g)
		require.ErrorIs(t, err, errFault)
		require.Empty(t, c.Groups())
		_, err = c.GroupAddr(g)
		require.ErrorIs(t, err, rdmanet.ErrNotJoined)
		fail.Store(false)
		require.NoError(t, c.JoinGroup(nil, g), "joined once the fault is gone")
		require.Len(t, c.Groups(), 1)
		require.NoError(t, c.LeaveGroup(nil, g))
	}
}

// A group that the provider joins under an MGID the conn is in already
// (on InfiniBand an IP group's MGID is known only after the join) is
// refused, naming both, and the first membership stays.
func TestJoinRefusesGroupJoinedUnderAnotherName(t *testing.T) {
	softOnly(t)
	t.Parallel()
	var same atomic.Pointer[ipoib.GID] // the MGID every join returns, once set
	f := rdmanet.Faults{Joined: func(m verbs.Membership) verbs.Membership {
		if g := same.Load(); g != nil {
			m.MGID = *g
		}
		return m
	}}
	g1 := newGroup()
	c := listen(t, g1, func(lc *rdmanet.ListenConfig) { lc.Backend = faults(t, &f) })
	a1, err := c.GroupAddr(g1)
	require.NoError(t, err)
	same.Store(&a1.GID)

	g2 := newGroup()
	err = c.JoinGroup(nil, g2)
	require.ErrorContains(t, err, "group "+g2.IP.String()+" already joined as MGID "+a1.GID.String())
	mgid, err := ipoib.RoCEv2MGID(netip.MustParseAddr(newGroup().IP.String()))
	require.NoError(t, err)
	other := rdmanet.AddrFromMGID(mgid)
	err = c.JoinGroup(nil, &other)
	require.ErrorContains(t, err, "group "+other.GID.String()+" already joined as MGID "+a1.GID.String())
	require.Equal(t, []rdmanet.Addr{a1}, c.Groups())
	_, err = c.GroupAddr(g2)
	require.ErrorIs(t, err, rdmanet.ErrNotJoined)
}

// A join whose path MTU is below the conn's lowers MTU() to it; one at
// or above it, or unknown (0), leaves MTU() as it was.
func TestJoinLowersMTUToThePath(t *testing.T) {
	softOnly(t)
	t.Parallel()
	var mtu atomic.Int32 // what every join reports
	f := rdmanet.Faults{Joined: func(m verbs.Membership) verbs.Membership { m.MTU = int(mtu.Load()); return m }}
	c := listen(t, nil, func(lc *rdmanet.ListenConfig) { lc.Backend = faults(t, &f) })
	was := c.MTU()
	require.Greater(t, was, 1024)
	for _, tc := range []struct{ path, want int }{{0, was}, {was + 1, was}, {was, was}, {1024, 1024}, {0, 1024}, {2048, 1024}} {
		mtu.Store(int32(tc.path))
		g := newGroup()
		require.NoError(t, c.JoinGroup(nil, g))
		require.Equal(t, tc.want, c.MTU(), "after a join with path MTU %d", tc.path)
		require.NoError(t, c.LeaveGroup(nil, g))
	}
}

// GroupAddr of a group not joined fails with ErrNotJoined; JoinGroup of
// an address that is no group's type says what it wants.
func TestGroupArguments(t *testing.T) {
	t.Parallel()
	c := listen(t, nil)
	_, err := c.GroupAddr(newGroup())
	require.ErrorIs(t, err, rdmanet.ErrNotJoined)
	var oe *net.OpError
	require.ErrorAs(t, err, &oe)
	require.Equal(t, "lookup", oe.Op)
	err = c.JoinGroup(nil, &net.TCPAddr{IP: net.IPv4(239, 1, 2, 3)})
	require.ErrorContains(t, err, "want a multicast *net.UDPAddr or *net.IPAddr, or a group's *rdmanet.Addr")
	require.Empty(t, c.Groups())
}

// A MULTICAST_ERROR for a group the conn is not in rejoins nothing, and
// the conn still rejoins its own group on the next one.
func TestMulticastErrorForUnjoinedGroup(t *testing.T) {
	softOnly(t)
	t.Parallel()
	g := newGroup()
	c := listen(t, g, func(lc *rdmanet.ListenConfig) { lc.Backend = faults(t, &rdmanet.Faults{}) })
	a, err := c.GroupAddr(g)
	require.NoError(t, err)
	require.NoError(t, rdmanet.InjectFaultEvent(c, verbs.Event{Type: verbs.EventMulticastError, MGID: ipoib.GID{0xff, 0x1e, 15: 9}}))
	require.NoError(t, rdmanet.InjectFaultEvent(c, verbs.Event{Type: verbs.EventMulticastError, MGID: a.GID}))
	require.Eventually(t, func() bool { return c.Stats().Rejoins == 1 }, 5*time.Second, time.Millisecond)
	require.Equal(t, []rdmanet.Addr{a}, c.Groups())
}

// A rejoin whose new address handle cannot be made leaves the joined
// group, backs off and tries again; the group works after it. (Not
// parallel: it replaces the back-off's timer for every conn.)
func TestRejoinRetriesFailedAddressHandle(t *testing.T) {
	softOnly(t)
	waits, restore := rdmanet.ObserveRejoinWaits()
	t.Cleanup(restore)
	var failAH atomic.Int32
	f := rdmanet.Faults{CreateAH: func(verbs.AHAttr) error {
		if failAH.Add(-1) >= 0 {
			return errFault
		}
		return nil
	}}
	g := newGroup()
	c := listen(t, g, func(lc *rdmanet.ListenConfig) { lc.Backend = faults(t, &f) })
	a, err := c.GroupAddr(g)
	require.NoError(t, err)
	failAH.Store(2)
	require.NoError(t, rdmanet.InjectFaultEvent(c, verbs.Event{Type: verbs.EventMulticastError, MGID: a.GID}))
	require.Eventually(t, func() bool { return c.Stats().Rejoins == 1 }, 5*time.Second, time.Millisecond)
	ms := time.Millisecond
	require.Equal(t, []time.Duration{10 * ms, 20 * ms}, waits(), "a back-off after each failed address handle")
	_, err = c.WriteTo([]byte("after the rejoin"), g)
	require.NoError(t, err)
	b, _ := mustRead(t, c)
	require.Equal(t, "after the rejoin", string(b))
}

// A rejoin whose join fails makes no address handle from it: the failed
// join's membership is the zero value, and an AH made from its zero
// DGID (which a provider may take: an InfiniBand AH to LID 0) would be
// recorded as the group's, counted as a rejoin, and never retried. The
// rejoin backs off and joins again instead, and the group works after
// it. (Not parallel: it replaces the back-off's timer for every conn.)
func TestRejoinAfterFailedJoinMakesNoAddressHandle(t *testing.T) {
	softOnly(t)
	waits, restore := rdmanet.ObserveRejoinWaits()
	t.Cleanup(restore)
	var failJoin, zeroAHs atomic.Int32
	f := rdmanet.Faults{
		Join: func(verbs.Group) error {
			if failJoin.Add(-1) >= 0 {
				return errFault
			}
			return nil
		},
		CreateAH: func(attr verbs.AHAttr) error {
			if attr.DGID.IsZero() {
				zeroAHs.Add(1)
			}
			return nil
		},
	}
	g := newGroup()
	c := listen(t, g, func(lc *rdmanet.ListenConfig) { lc.Backend = faults(t, &f) })
	a, err := c.GroupAddr(g)
	require.NoError(t, err)
	failJoin.Store(2)
	require.NoError(t, rdmanet.InjectFaultEvent(c, verbs.Event{Type: verbs.EventMulticastError, MGID: a.GID}))
	require.Eventually(t, func() bool { return c.Stats().Rejoins == 1 }, 5*time.Second, time.Millisecond,
		"waiting for the rejoin after two failed joins")
	require.Zero(t, zeroAHs.Load(), "address handles made from a failed join's membership")
	ms := time.Millisecond
	require.Equal(t, []time.Duration{10 * ms, 20 * ms}, waits(), "a back-off after each failed join")
	require.Equal(t, []rdmanet.Addr{a}, c.Groups())
	_, err = c.WriteTo([]byte("after the rejoin"), g)
	require.NoError(t, err)
	b, _ := mustRead(t, c)
	require.Equal(t, "after the rejoin", string(b))
}
