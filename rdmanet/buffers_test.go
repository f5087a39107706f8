//go:build linux

package rdmanet_test

import (
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/go-rdma/rdmanet/rdmanet"
	"github.com/stretchr/testify/require"
)

// sysctlInt reads an integer under /proc/sys.
func sysctlInt(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	return n
}

// SetReadBuffer and SetWriteBuffer set the software backend's socket
// buffers, and ReadBuffer and WriteBuffer read back what the kernel
// granted (capped at net.core.rmem_max / wmem_max). On rdma-core the
// rings are the buffers: a size they hold succeeds, a larger one fails
// naming the depth to listen with. A negative size is refused, and a
// closed conn says net.ErrClosed.
func TestSetReadWriteBuffer(t *testing.T) {
	c := listen(t, newGroup())
	var op *net.OpError
	if c.Backend().Name == rdmanet.BackendRDMACore {
		r, w := c.ReadBuffer(), c.WriteBuffer()
		t.Logf("rdma-core MTU %d: ReadBuffer %d, WriteBuffer %d", c.MTU(), r, w)
		require.Positive(t, r)
		require.Positive(t, w)
		require.NoError(t, c.SetReadBuffer(r), "a size the receive ring holds")
		require.NoError(t, c.SetWriteBuffer(w), "a size the send ring holds")
		err := c.SetReadBuffer(r + 1)
		require.ErrorIs(t, err, errors.ErrUnsupported)
		require.ErrorContains(t, err, "ListenConfig.RecvDepth")
		require.ErrorAs(t, err, &op)
		err = c.SetWriteBuffer(w + 1)
		require.ErrorIs(t, err, errors.ErrUnsupported)
		require.ErrorContains(t, err, "ListenConfig.SendDepth")
		require.Equal(t, r, c.ReadBuffer(), "ReadBuffer after a refused size")
	} else {
		rmax := sysctlInt(t, "/proc/sys/net/core/rmem_max")
		wmax := sysctlInt(t, "/proc/sys/net/core/wmem_max")
		require.Equal(t, min(rdmanet.SoftwareSocketBuffer, rmax), c.ReadBuffer(), "ReadBuffer at listen: SoftwareSocketBuffer asked, capped at rmem_max")
		require.Equal(t, min(rdmanet.SoftwareSocketBuffer, wmax), c.WriteBuffer(), "WriteBuffer at listen")
		for _, n := range []int{64 << 10, 200 << 10, 1 << 30} {
			require.NoError(t, c.SetReadBuffer(n))
			require.Equal(t, min(n, rmax), c.ReadBuffer(), "ReadBuffer after SetReadBuffer(%d)", n)
			require.NoError(t, c.SetWriteBuffer(n))
			require.Equal(t, min(n, wmax), c.WriteBuffer(), "WriteBuffer after SetWriteBuffer(%d)", n)
		}
		require.NoError(t, c.SetReadBuffer(96<<10))
		// The datapath still works with the new sizes.
		g := newGroup()
		rx, tx := listen(t, g), listen(t, g)
		require.NoError(t, rx.SetReadBuffer(64<<10))
		require.NoError(t, tx.SetWriteBuffer(64<<10))
		_, err := tx.WriteTo([]byte("after"), g)
		require.NoError(t, err)
		b, _ := mustRead(t, rx)
		require.Equal(t, "after", string(b))
	}
	before := c.ReadBuffer()
	for _, set := range []func(int) error{c.SetReadBuffer, c.SetWriteBuffer} {
		err := set(-1)
		require.ErrorContains(t, err, "must not be negative")
		require.ErrorAs(t, err, &op)
		require.Equal(t, "set", op.Op)
	}
	require.Equal(t, before, c.ReadBuffer(), "ReadBuffer after a negative size")

	w := c.WriteBuffer()
	require.NoError(t, c.Close())
	for _, set := range []func(int) error{c.SetReadBuffer, c.SetWriteBuffer} {
		err := set(64 << 10)
		require.ErrorIs(t, err, net.ErrClosed)
		require.ErrorAs(t, err, &op)
	}
	require.Equal(t, before, c.ReadBuffer(), "ReadBuffer after Close: the last value")
	require.Equal(t, w, c.WriteBuffer(), "WriteBuffer after Close: the last value")
}

// nil, and a nil pointer of every address type a conn takes, is one
// missing address on WriteTo, JoinGroup, LeaveGroup and GroupAddr; a
// multicast *net.IPAddr names a group on all four, as the *net.UDPAddr
// does.
func TestAddressRulesEveryCall(t *testing.T) {
	c := listen(t, nil)
	for _, a := range []net.Addr{nil, (*net.UDPAddr)(nil), (*net.IPAddr)(nil), (*rdmanet.Addr)(nil)} {
		_, werr := c.WriteTo([]byte("x"), a)
		_, gerr := c.GroupAddr(a)
		for what, err := range map[string]error{
			"WriteTo":    werr,
			"JoinGroup":  c.JoinGroup(nil, a),
			"LeaveGroup": c.LeaveGroup(nil, a),
			"GroupAddr":  gerr,
		} {
			require.ErrorContains(t, err, "missing address", "%s(%T)", what, a)
			var op *net.OpError
			require.ErrorAs(t, err, &op, "%s(%T)", what, a)
		}
	}
	_, err := c.WriteBatch([]rdmanet.Message{{Buffer: []byte("x")}})
	require.ErrorContains(t, err, "missing address", "WriteBatch with the zero Addr")

	g := newGroup()
	ip := &net.IPAddr{IP: g.IP}
	require.NoError(t, c.JoinGroup(nil, ip))
	gaIP, err := c.GroupAddr(ip)
	require.NoError(t, err)
	gaUDP, err := c.GroupAddr(g)
	require.NoError(t, err)
	require.Equal(t, gaUDP, gaIP)
	for _, to := range []net.Addr{ip, g, &gaIP} {
		_, err := c.WriteTo([]byte("to "+to.String()), to)
		require.NoError(t, err, "WriteTo(%T)", to)
		b, _ := mustRead(t, c) // loopback is on
		require.Equal(t, "to "+to.String(), string(b))
	}
	require.NoError(t, c.LeaveGroup(nil, ip))
	_, err = c.WriteTo([]byte("x"), ip)
	require.ErrorIs(t, err, rdmanet.ErrNotJoined)
	_, err = c.WriteTo([]byte("x"), &net.IPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.ErrorContains(t, err, "not a multicast group")
}
