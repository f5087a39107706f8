//go:build linux

package soft_test

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/internal/verbs/soft"
)

// withFd0Closed runs f with fd 0 closed, as in a process started with
// stdin closed: the next fd made is 0. A fd 0 that was open is put back
// after. (Not a parallel test: nothing else makes fds meanwhile.)
func withFd0Closed(t *testing.T, f func()) {
	t.Helper()
	if _, err := unix.FcntlInt(0, unix.F_GETFD, 0); err == nil {
		saved, err := unix.Dup(0)
		require.NoError(t, err)
		require.NoError(t, unix.Close(0))
		defer func() {
			unix.Dup2(saved, 0)
			unix.Close(saved)
		}()
	}
	f()
}

// isUDPSocket reports whether fd is an open UDP socket.
func isUDPSocket(fd int) bool {
	p, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PROTOCOL)
	return err == nil && p == unix.IPPROTO_UDP
}

// The socket a Serves or a Bind makes is closed when it is not handed on,
// also where it is fd 0: by a Serves, and by a Serves or a Bind whose
// address no netdev has.
func TestResolvedSocketAtFd0Closed(t *testing.T) {
	p, err := verbs.Lookup(verbs.Software)
	require.NoError(t, err)
	require.True(t, p.Serves(verbs.BindConfig{}), "loopback") // views made once, before fd 0 is free
	nowhere := verbs.BindConfig{Addr: net.IPv4(192, 0, 2, 1)} // TEST-NET-1
	withFd0Closed(t, func() {
		require.True(t, p.Serves(verbs.BindConfig{}))
		require.False(t, isUDPSocket(0), "the socket Serves made, at fd 0, left open")
		require.False(t, p.Serves(nowhere))
		require.False(t, isUDPSocket(0), "the socket a Serves of %v made, at fd 0, left open", nowhere.Addr)
		_, err := p.Bind(nowhere)
		require.ErrorIs(t, err, verbs.ErrNoDevice)
		require.False(t, isUDPSocket(0), "the socket a failed Bind made, at fd 0, left open")
	})
}

// A socket at fd 0 is a socket: its namespace's cookie is told as any
// other's. (Bind tags the QPN it reserves with the cookie of the socket
// it makes, and keeps the namespace's netlink view by it.) No socket (-1,
// as Bind passes when it could make none) has no cookie: 0.
func TestNetnsCookieOfFd0(t *testing.T) {
	require.Zero(t, soft.NetnsCookie(-1), "no socket")
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(fd)
	want := soft.NetnsCookie(fd)
	if want == 0 {
		t.Skip("no SO_NETNS_COOKIE: it needs Linux 5.14")
	}
	withFd0Closed(t, func() {
		fd0, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		require.NoError(t, err)
		require.Zero(t, fd0)
		defer unix.Close(fd0)
		require.Equal(t, want, soft.NetnsCookie(fd0))
	})
}

// A closed QP holds no fd: a socket buffer call on it then sets nothing,
// not the buffer of the socket that took a number the QP had (here fd 0).
func TestSocketBufferAfterCloseSetsNothing(t *testing.T) {
	p, err := verbs.Lookup(verbs.Software)
	require.NoError(t, err)
	id, err := p.Bind(verbs.BindConfig{})
	require.NoError(t, err)
	defer id.Close()
	qp, err := id.CreateQP(verbs.QPConfig{})
	require.NoError(t, err)
	require.NoError(t, id.Close())
	withFd0Closed(t, func() {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		require.NoError(t, err)
		require.Zero(t, fd)
		defer unix.Close(fd)
		for _, opt := range []int{unix.SO_RCVBUF, unix.SO_SNDBUF} {
			require.NoError(t, unix.SetsockoptInt(fd, unix.SOL_SOCKET, opt, 8<<10))
		}
		rcv, _ := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF)
		snd, _ := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF)
		qp.SetSocketBuffer(true, 96<<10)
		qp.SetSocketBuffer(false, 96<<10)
		got, _ := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF)
		require.Equal(t, rcv, got, "SO_RCVBUF of fd 0")
		got, _ = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF)
		require.Equal(t, snd, got, "SO_SNDBUF of fd 0")
	})
}

// SetSocketBuffer sets the buffer of a QP's socket that is fd 0 too, and
// Close closes it.
func TestSocketBufferOfFd0(t *testing.T) {
	newEndpoint(t, verbs.QPConfig{}) // views made once, before fd 0 is free
	p, err := verbs.Lookup(verbs.Software)
	require.NoError(t, err)
	withFd0Closed(t, func() {
		id, err := p.Bind(verbs.BindConfig{})
		require.NoError(t, err)
		defer id.Close()
		qp, err := id.CreateQP(verbs.QPConfig{})
		require.NoError(t, err)
		require.True(t, isUDPSocket(0), "the QP's first socket at fd 0")
		got, err := qp.SetSocketBuffer(false, 96<<10)
		require.NoError(t, err)
		require.Equal(t, 96<<10, got, "SO_SNDBUF of the unicast socket")
		require.NoError(t, id.Close())
		require.False(t, isUDPSocket(0), "the QP's socket at fd 0 left open by Close")
	})
}

// SocketBuffer reports what SetSocketBuffer set, as net.UDPConn's
// SetReadBuffer takes it: the kernel's doubled figure halved. The receive
// buffer is set on both sockets, the send buffer on the unicast one.
func TestSocketBufferAsSet(t *testing.T) {
	e := newEndpoint(t, verbs.QPConfig{})
	for _, recv := range []bool{true, false} {
		got, err := e.qp.SetSocketBuffer(recv, 64<<10)
		require.NoError(t, err)
		require.Equal(t, 64<<10, got, "recv %v", recv)
		require.Equal(t, 64<<10, e.qp.SocketBuffer(recv), "recv %v", recv)
	}
	// SocketBuffer reports the least of the two receive buffers: each
	// socket's own, smaller than a new socket's, says it was set.
	for name, fd := range map[string]int{"multicast": soft.RecvWaiterHooksOf(e.qp).NarrowFd(), "unicast": soft.UnicastFd(e.qp)} {
		n, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF)
		require.NoError(t, err)
		require.Equal(t, 2*64<<10, n, "the %s socket's SO_RCVBUF", name)
	}
	n, err := unix.GetsockoptInt(soft.UnicastFd(e.qp), unix.SOL_SOCKET, unix.SO_SNDBUF)
	require.NoError(t, err)
	require.Equal(t, 2*64<<10, n, "the unicast socket's SO_SNDBUF")
}

// TestMulticastSocketSeesOnlyItsGroups: a QP's multicast socket, bound to
// 0.0.0.0:4791, gets the datagrams of the groups it joined and of no group
// that only another socket in the namespace joined (IP_MULTICAST_ALL off:
// Linux's default, on, would hand it those too). A QP that reads it bare
// (GRHAddressesOnly, one group) would otherwise take another group's
// datagram for its own group's; one that reads the destination would drop
// it as not for it.
func TestMulticastSocketSeesOnlyItsGroups(t *testing.T) {
	const mine, other = "239.201.9.21", "239.201.9.22"
	full := newEndpoint(t, verbs.QPConfig{})
	bare := newEndpoint(t, verbs.QPConfig{GRHAddressesOnly: true})
	o := newEndpoint(t, verbs.QPConfig{})
	s := newEndpoint(t, verbs.QPConfig{})
	for _, e := range []*endpoint{full, bare, o} {
		e.postRecvs(0, 8)
	}
	full.join(mine, false)
	bare.join(mine, false)
	o.join(other, false)
	// A Poll that reads the multicast socket dry lets bare's next reads be
	// bare.
	var wcs [1]verbs.WC
	n, err := bare.qp.RecvCQ().Poll(wcs[:])
	require.NoError(t, err)
	require.Zero(t, n)
	mo, ahOther := s.join(other, true)
	mm, ahMine := s.join(mine, true)
	s.send(ahOther, mo.RemoteQPN, []byte("other"), 0, 0)
	s.send(ahMine, mm.RemoteQPN, []byte("mine"), 0, 0)

	got := o.recv(1, 2*time.Second)
	require.Len(t, got, 1)
	require.Equal(t, "other", string(o.buf(got[0])[verbs.GRHSize:]))
	// The group's datagram came after the other's, to every socket that
	// had it (one delivery, at the send): once it is read, so is anything
	// of the other group's queued before it.
	bareBefore := soft.BareReads(bare.qp)
	for _, e := range []*endpoint{full, bare} {
		got := e.recv(1, 2*time.Second)
		require.Len(t, got, 1)
		assert.Equal(t, "mine", string(e.buf(got[0])[verbs.GRHSize:]))
		assert.Equal(t, net.ParseIP(mine).To4(), net.IP(e.buf(got[0])[36:40]), "GRH destination")
		assert.Equal(t, soft.Drops{}, e.qp.Drops(), "the other group's datagram reached the socket")
	}
	assert.Greater(t, soft.BareReads(bare.qp), bareBefore, "the GRHAddressesOnly QP's read was not bare")
}
