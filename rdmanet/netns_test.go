//go:build linux

package rdmanet_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/testenv"
	"github.com/go-rdma/rdmanet/ipoib"
	"github.com/go-rdma/rdmanet/rdmanet"
)

func setLoMTU(t *testing.T, mtu string) {
	t.Helper()
	out, err := exec.Command("ip", "link", "set", "lo", "mtu", mtu).CombinedOutput()
	require.NoError(t, err, "ip link set lo mtu %s: %s", mtu, out)
}

// softListen opens a software-backend conn on g (nil: none), closed when
// t ends; mod changes its config first.
func softListen(t *testing.T, g *net.UDPAddr, mod ...func(*rdmanet.ListenConfig)) *rdmanet.Conn {
	t.Helper()
	lc := rdmanet.ListenConfig{Backend: rdmanet.BackendSoftware}
	for _, m := range mod {
		m(&lc)
	}
	c, err := lc.ListenMulticast(context.Background(), "rdma", nil, g)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// requireOpErrno checks that err is a *net.OpError whose chain holds the
// errno, as net.UDPConn's send errors are.
func requireOpErrno(t *testing.T, err error, errno syscall.Errno) {
	t.Helper()
	require.Error(t, err)
	var oe *net.OpError
	require.True(t, errors.As(err, &oe), "got %T (%v), want a *net.OpError", err, err)
	require.ErrorIs(t, err, errno)
}

// MTU() is the netdev MTU of the namespace the conn lives in: in a plain
// `unshare -n`, /sys/class/net/lo still shows the host's lo (65536), while
// the namespace's lo has 1500, so RoCE's 1024.
func TestMTUFromTheNetworkNamespace(t *testing.T) {
	if !testenv.InOwnNetns(t) {
		return
	}
	setLoMTU(t, "1500")
	if b, err := os.ReadFile("/sys/class/net/lo/mtu"); err == nil {
		t.Logf("sysfs says lo mtu %s (another namespace's, when it is not 1500)", strings.TrimSpace(string(b)))
	}
	g := newGroup()
	c := softListen(t, g)
	require.Equal(t, 1024, c.MTU(), "RoCE MTU for a netdev MTU of 1500")
	for _, n := range []int{2000, 4096} {
		_, err := c.WriteTo(make([]byte, n), g)
		require.ErrorIs(t, err, rdmanet.ErrMessageTooLong, "%d bytes", n)
	}
	_, err := c.WriteTo(make([]byte, 1024), g)
	require.NoError(t, err)
	mustRead(t, c)
}

// A lone datagram the kernel refuses returns the kernel's errno from that
// WriteTo: EMSGSIZE when lo's MTU fell under the conn (it is also
// ErrMessageTooLong), counted by reason.
func TestWriteToReturnsTheKernelsEMSGSIZE(t *testing.T) {
	if !testenv.InOwnNetns(t) {
		return
	}
	g := newGroup()
	c := softListen(t, g)
	require.Equal(t, 4096, c.MTU())
	setLoMTU(t, "1500")
	_, err := c.WriteTo(make([]byte, 2000), g)
	requireOpErrno(t, err, syscall.EMSGSIZE)
	require.ErrorIs(t, err, rdmanet.ErrMessageTooLong)
	var se *os.SyscallError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "sendto", se.Syscall)
	t.Logf("the error: %v", err)
	require.NotErrorIs(t, err, rdmanet.ErrEarlierSendFailed)
	st := c.Stats()
	assert.Equal(t, uint64(1), st.SendErrors)
	assert.Equal(t, map[string]uint64{rdmanet.SendErrMessageTooLong: 1}, st.SendFailed)
	assert.Zero(t, st.Sent, "a refused datagram is not counted sent")

	// The error was returned: the next write is not failed by it.
	_, err = c.WriteTo(make([]byte, 1000), g)
	require.NoError(t, err)
	mustRead(t, c)
}

// A unicast destination that cannot be reached fails when its address
// handle is made, at the first WriteTo to it, as ibv_create_ah does on
// RoCE: ENETUNREACH with no route (::ffff:10.0.0.1 in a namespace with only
// lo), EHOSTUNREACH through an unreachable route.
func TestWriteToUnreachableUnicast(t *testing.T) {
	if !testenv.InOwnNetns(t) {
		return
	}
	out, err := exec.Command("ip", "route", "add", "unreachable", "10.2.0.0/16").CombinedOutput()
	require.NoError(t, err, "ip route add unreachable: %s", out)
	c := softListen(t, newGroup())
	for _, tc := range []struct {
		ip    string
		errno syscall.Errno
	}{
		{"::ffff:10.0.0.1", syscall.ENETUNREACH},
		{"::ffff:10.2.0.1", syscall.EHOSTUNREACH},
	} {
		to := &rdmanet.Addr{GID: ipoib.GIDFromIP(netip.MustParseAddr(tc.ip)), QPN: 0x1234}
		for range 2 { // the failed AH is not cached
			n, err := c.WriteTo([]byte("unreach"), to)
			assert.Zero(t, n)
			requireOpErrno(t, err, tc.errno)
		}
	}
	st := c.Stats()
	assert.Equal(t, uint64(4), st.SendErrors)
	assert.Equal(t, map[string]uint64{rdmanet.SendErrNetUnreachable: 2, rdmanet.SendErrHostUnreachable: 2}, st.SendFailed)
}

// A datagram of a batch the kernel refuses is known only after WriteBatch
// posted it: it is counted, and the next write returns it (and sends
// nothing); the one after that goes out.
func TestBatchSendErrorReturnedByTheNextWrite(t *testing.T) {
	if !testenv.InOwnNetns(t) {
		return
	}
	g := newGroup()
	c := softListen(t, g)
	ga, err := c.GroupAddr(g)
	require.NoError(t, err)
	setLoMTU(t, "1500")
	ms := []rdmanet.Message{
		{Buffer: make([]byte, 100), Addr: ga},
		{Buffer: make([]byte, 2000), Addr: ga},
		{Buffer: make([]byte, 2000), Addr: ga},
	}
	n, err := c.WriteBatch(ms)
	require.NoError(t, err)
	require.Equal(t, 3, n, "all three posted")

	_, err = c.WriteTo([]byte("next"), g)
	requireOpErrno(t, err, syscall.EMSGSIZE)
	require.ErrorIs(t, err, rdmanet.ErrEarlierSendFailed)
	st := c.Stats()
	assert.Equal(t, uint64(2), st.SendErrors)
	assert.Equal(t, map[string]uint64{rdmanet.SendErrMessageTooLong: 2}, st.SendFailed)

	b, _ := mustRead(t, c)
	require.Len(t, b, 100, "the batch's first datagram went out")
	_, err = c.WriteTo([]byte("after"), g)
	require.NoError(t, err, "each failure is returned once")
	b, _ = mustRead(t, c)
	require.Equal(t, "after", string(b), "the failed write sent nothing")
}

// The software backend's group limit is the kernel's per-socket
// net.ipv4.igmp_max_memberships: the join past it fails with
// ErrGroupLimit, and the error names the limit, its value and how to
// raise it. Send-only groups do not count.
func TestSoftwareGroupLimitIsNamed(t *testing.T) {
	if !testenv.InOwnNetns(t) {
		return
	}
	require.NoError(t, os.WriteFile("/proc/sys/net/ipv4/igmp_max_memberships", []byte("5"), 0o644))
	c := softListen(t, nil)
	for i := range 5 {
		require.NoError(t, c.JoinGroup(nil, &net.UDPAddr{IP: net.IPv4(239, 88, 0, byte(i))}), "group %d", i)
	}
	err := c.JoinGroup(nil, &net.UDPAddr{IP: net.IPv4(239, 88, 0, 5)})
	require.ErrorIs(t, err, rdmanet.ErrGroupLimit)
	require.ErrorIs(t, err, syscall.ENOBUFS)
	for _, want := range []string{"net.ipv4.igmp_max_memberships (5 in this network namespace)", "has 5 groups", "sysctl -w net.ipv4.igmp_max_memberships="} {
		assert.ErrorContains(t, err, want)
	}
	assert.Len(t, c.Groups(), 5)

	tx := softListen(t, nil, sendOnly)
	for i := range 8 { // send-only: no IP membership
		require.NoError(t, tx.JoinGroup(nil, &net.UDPAddr{IP: net.IPv4(239, 88, 1, byte(i))}), "send-only group %d", i)
	}
}

// Every reason a software QP counts (it reports them all, zero or not) is
// one of the exported DropReasons, but its own loopback, which Stats counts
// in Loopback. In the rxe VM it runs in a namespace of its own, where the
// software backend can bind UDP 4791.
func TestSoftwareDropKeysAreExported(t *testing.T) {
	if testDevice != "" && !testenv.InOwnNetns(t) {
		return
	}
	c := softListen(t, newGroup())
	keys, ok := rdmanet.DropCountKeys(c)
	require.True(t, ok, "the software QP counts drops")
	require.NotEmpty(t, keys)
	for _, k := range keys {
		if k != "own-loopback" {
			assert.Contains(t, rdmanet.DropReasons, k, "drop reason %q is not an exported constant", k)
		}
	}
	assert.Contains(t, keys, rdmanet.DropOverflow)
	assert.Contains(t, keys, rdmanet.DropBadICRC)
}

// A firewall's drop on output is the kernel's EPERM from that WriteTo,
// counted as SendErrNotPermitted.
func TestWriteToReturnsAFirewallsEPERM(t *testing.T) {
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("nft not found: apt-get install nftables")
	}
	if !testenv.InOwnNetns(t) {
		return
	}
	g := newGroup()
	c := softListen(t, g)
	for _, args := range [][]string{
		{"add", "table", "inet", "t"},
		{"add", "chain", "inet", "t", "out", "{ type filter hook output priority 0; }"},
		{"add", "rule", "inet", "t", "out", "udp", "dport", "4791", "drop"},
	} {
		out, err := exec.Command("nft", args...).CombinedOutput()
		require.NoError(t, err, "nft %v: %s", args, out)
	}
	_, err := c.WriteTo([]byte("dropped"), g)
	requireOpErrno(t, err, syscall.EPERM)
	var oe *net.OpError
	require.ErrorAs(t, err, &oe)
	se, ok := oe.Err.(*os.SyscallError)
	require.True(t, ok, "OpError.Err is %T, want *os.SyscallError as net.UDPConn's", oe.Err)
	assert.Equal(t, "sendto", se.Syscall)
	t.Logf("the error: %v", err)
	assert.Equal(t, map[string]uint64{rdmanet.SendErrNotPermitted: 1}, c.Stats().SendFailed)
}

// A device's error completion (no errno, as on rdma-core) is counted as
// SendErrCompletion and returned by the next write, once.
func TestErrorCompletionReturnedByTheNextWrite(t *testing.T) {
	if testDevice != "" && !testenv.InOwnNetns(t) {
		return
	}
	g := newGroup()
	lc := rdmanet.ListenConfig{Backend: rdmanet.BackendFailedCompletions, SendDepth: 4} // every send signaled
	c, err := lc.ListenMulticast(context.Background(), "rdma", nil, g)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.WriteTo([]byte("fails later"), g)
	require.NoError(t, err, "posted: its completion comes after")
	_, err = c.WriteTo([]byte("next"), g)
	require.ErrorIs(t, err, rdmanet.ErrEarlierSendFailed)
	var oe *net.OpError
	require.ErrorAs(t, err, &oe)
	require.ErrorContains(t, err, "fatal error")
	st := c.Stats()
	assert.Equal(t, uint64(1), st.SendErrors)
	assert.Equal(t, map[string]uint64{rdmanet.SendErrCompletion: 1}, st.SendFailed)
	_, err = c.WriteTo([]byte("after"), g)
	require.NoError(t, err, "returned once; the next write's own completion fails later")
}

// sendOnly is a softListen or listen mod: a send-only conn.
func sendOnly(lc *rdmanet.ListenConfig) { lc.SendOnly = true }
