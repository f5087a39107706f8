//go:build linux

package rdmanet_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/ipoib"
	"github.com/go-rdma/rdmanet/rdmanet"
)

// roceMGID is the RoCE v2 MGID of an IPv4 group (::ffff:a.b.c.d), the
// group's name on the software backend and on rxe.
func roceMGID(t *testing.T, ip netip.Addr) ipoib.MGID {
	t.Helper()
	m, err := ipoib.RoCEv2MGID(ip)
	require.NoError(t, err)
	return m
}

// TestJoinRawMGID joins a group by its MGID (as mckey -M does) and checks
// that the conn meets conns that joined the IP group: it receives what
// they send to the IP group, and what it sends to the MGID form reaches
// them. Both Addr forms are used: the struct literal and GroupAddr.
func TestJoinRawMGID(t *testing.T) {
	t.Parallel()
	g := newGroup()
	ip, ok := netip.AddrFromSlice(g.IP.To4())
	require.True(t, ok)
	mgid := roceMGID(t, ip)

	ipConn := listen(t, g) // joined through the IP group
	mg := listen(t, nil)   // joined through the raw MGID
	raw := &rdmanet.Addr{GID: mgid, QPN: rdmanet.MulticastQPN}
	require.NoError(t, mg.JoinGroup(nil, raw))
	require.Error(t, mg.JoinGroup(nil, raw), "joining the same MGID twice")
	require.ErrorContains(t, mg.JoinGroup(nil, g), "already joined as MGID", "the IP group is the same group")
	require.Len(t, mg.Groups(), 1)

	ga, err := mg.GroupAddr(raw)
	require.NoError(t, err)
	require.Equal(t, *raw, ga, "the group's Addr is its MGID and the multicast QPN")
	require.Equal(t, []rdmanet.Addr{*raw}, mg.Groups())

	// IP group -> MGID member.
	for i := 0; i < 5; i++ {
		_, err := ipConn.WriteTo(fmt.Appendf(nil, "ip%d", i), g)
		require.NoError(t, err)
	}
	for i := 0; i < 5; i++ {
		b, from := mustRead(t, mg)
		require.Equal(t, fmt.Sprint("ip", i), string(b))
		require.Equal(t, ipConn.LocalAddr().(*rdmanet.Addr).QPN, from.QPN, "sender QPN")
	}
	// The sender's own copy (loopback is on) and nothing else.
	for i := 0; i < 5; i++ {
		mustRead(t, ipConn)
	}

	// MGID form -> IP group member, with both spellings of the address.
	ga2 := rdmanet.AddrFromMGID(mgid)
	for i, to := range []*rdmanet.Addr{raw, &ga2} {
		_, err := mg.WriteTo(fmt.Appendf(nil, "mgid%d", i), to)
		require.NoError(t, err)
		b, from := mustRead(t, ipConn)
		require.Equal(t, fmt.Sprint("mgid", i), string(b))
		require.Equal(t, mg.LocalAddr().(*rdmanet.Addr).QPN, from.QPN, "sender QPN")
		b, _ = mustRead(t, mg) // its own copy
		require.Equal(t, fmt.Sprint("mgid", i), string(b))
	}

	// Leaving by MGID stops delivery.
	require.NoError(t, mg.LeaveGroup(nil, raw))
	require.Empty(t, mg.Groups())
	_, err = ipConn.WriteTo([]byte("after"), g)
	require.NoError(t, err)
	mustRead(t, ipConn)
	expectNothing(t, mg, 150*time.Millisecond)
}

// TestJoinRawMGIDNotAGroup: an Addr that is not a multicast GID is refused
// before anything reaches the backend.
func TestJoinRawMGIDNotAGroup(t *testing.T) {
	t.Parallel()
	c := listen(t, nil)
	unicast := &rdmanet.Addr{GID: ipoib.GIDFromIP(netip.MustParseAddr("10.1.2.3")), QPN: rdmanet.MulticastQPN}
	require.ErrorContains(t, c.JoinGroup(nil, unicast), "not a multicast group")
}
