//go:build linux

package soft

import (
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/testenv"
)

// TestSendtoWaitsForRoom fills a non-blocking datagram socket's buffer,
// then checks that sendto blocks in waitWritable until the peer reads, and
// sends then.
func TestSendtoWaitsForRoom(t *testing.T) {
	fds, n := fullSocketpair(t)
	done := make(chan error, 1)
	go func() { done <- sendto(fds[0], []byte("last"), nil) }() // no address: the pair is connected
	select {
	case err := <-done:
		t.Fatalf("sendto returned %v with the buffer full (%d datagrams queued)", err, n)
	case <-time.After(100 * time.Millisecond):
	}
	buf := make([]byte, 2048)
	for range n {
		if _, err := unix.Read(fds[1], buf); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("sendto after room was made: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("sendto still blocked after the peer read everything")
	}
	k, err := unix.Read(fds[1], buf)
	if err != nil || string(buf[:k]) != "last" {
		t.Fatalf("read %q, %v; want the datagram sendto waited to send", buf[:k], err)
	}
}

// The kernel's IP_TOS control message carries one byte (ip_cmsg_recv_tos):
// parseCmsgs takes it.
func TestParseCmsgsOneByteTOS(t *testing.T) {
	b := make([]byte, unix.CmsgSpace(1))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = unix.IPPROTO_IP, unix.IP_TOS
	h.SetLen(unix.CmsgLen(1))
	b[unix.CmsgLen(0)] = 0xB8 // DSCP EF
	var m rxMeta
	parseCmsgs(b, &m)
	if m.tos != 0xB8 {
		t.Errorf("parseCmsgs: tos %#x, want 0xb8", m.tos)
	}
}

// TestSendmmsgWaitsForRoom is TestSendtoWaitsForRoom for sendmmsg: with
// the buffer full it waits in waitWritable, then sends.
func TestSendmmsgWaitsForRoom(t *testing.T) {
	fds, n := fullSocketpair(t)
	last := []byte("last")
	var iov unix.Iovec
	setIov(&iov, last)
	msgs := []mmsghdr{{Hdr: unix.Msghdr{Iov: &iov, Iovlen: 1}}}
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		k, err := sendmmsg(fds[0], msgs, 0)
		done <- result{k, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("got sendmmsg %d, %v with the buffer full (%d datagrams queued), want it to wait", r.n, r.err, n)
	case <-time.After(100 * time.Millisecond):
	}
	buf := make([]byte, 2048)
	for range n {
		_, err := unix.Read(fds[1], buf)
		require.NoError(t, err)
	}
	select {
	case r := <-done:
		require.NoError(t, r.err)
		require.Equal(t, 1, r.n, "got %d sent, want 1", r.n)
	case <-time.After(5 * time.Second):
		t.Fatal("sendmmsg still blocked after the peer read everything")
	}
	// Blocking now: the datagram sendmmsg sent must be there.
	require.NoError(t, unix.SetNonblock(fds[1], false))
	k, err := unix.Read(fds[1], buf)
	require.NoError(t, err)
	require.Equal(t, "last", string(buf[:k]), "got %q, want the datagram sendmmsg waited to send", buf[:k])
}

// A failed epoll_pwait or sendmmsg reports nothing done: recvepoll reads
// epollWait's count without its error.
func TestRawSyscallErrorsCountNone(t *testing.T) {
	var evs [4]unix.EpollEvent
	n, err := epollWait(-1, evs[:])
	require.ErrorIs(t, err, unix.EBADF)
	require.Equal(t, 0, n, "got epollWait count %d on EBADF, want 0", n)
	var iov unix.Iovec
	setIov(&iov, []byte("x"))
	n, err = sendmmsg(-1, []mmsghdr{{Hdr: unix.Msghdr{Iov: &iov, Iovlen: 1}}}, 0)
	require.ErrorIs(t, err, unix.EBADF)
	require.Equal(t, 0, n, "got sendmmsg count %d on EBADF, want 0", n)
}

// newEpoll and udpSocket that fail part way return -1 and close what
// they made.
func TestFdMakersFailClosing(t *testing.T) {
	before := testenv.OpenFds(t)
	fd, err := newEpoll([]int{-1}, []uint32{unix.EPOLLIN})
	require.ErrorIs(t, err, unix.EBADF)
	require.Equal(t, -1, fd, "got newEpoll fd %d on a bad fd, want -1", fd)
	fd, err = udpSocket([]sockopt{{unix.SOL_SOCKET, -1, 1, "bogus"}})
	require.ErrorIs(t, err, unix.ENOPROTOOPT)
	require.Equal(t, -1, fd, "got udpSocket fd %d with a bad option, want -1", fd)
	require.Equal(t, before, testenv.OpenFds(t), "got %d fds open, want %d as before", testenv.OpenFds(t), before)
}

// An IP_TOS control message with no byte (the kernel sends one) leaves
// tos alone; it is not read past.
func TestParseCmsgsEmptyTOS(t *testing.T) {
	b := make([]byte, unix.CmsgSpace(0)+unix.CmsgSpace(4))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = unix.IPPROTO_IP, unix.IP_TOS
	h.SetLen(unix.CmsgLen(0))
	// A TTL after it, as the kernel orders them: still read.
	h = (*unix.Cmsghdr)(unsafe.Pointer(&b[unix.CmsgSpace(0)]))
	h.Level, h.Type = unix.IPPROTO_IP, unix.IP_TTL
	h.SetLen(unix.CmsgLen(4))
	b[unix.CmsgSpace(0)+unix.CmsgLen(0)] = 9
	var m rxMeta
	require.NotPanics(t, func() { parseCmsgs(b, &m) }, "parseCmsgs read an empty IP_TOS")
	require.Equal(t, uint8(0), m.tos, "got tos %#x, want 0", m.tos)
	require.Equal(t, uint8(9), m.ttl, "got ttl %d, want 9", m.ttl)
}

// fullSocketpair returns a connected non-blocking datagram socket pair
// whose first end has filled the second's receive buffer with n
// datagrams of 1 KiB (the next write would be EAGAIN); the test's end
// closes both.
func fullSocketpair(t *testing.T) (fds [2]int, n int) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK, 0)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(fds[0]); unix.Close(fds[1]) })
	msg := make([]byte, 1024)
	for ; ; n++ {
		_, err := unix.Write(fds[0], msg)
		if err == unix.EAGAIN {
			return fds, n
		}
		require.NoError(t, err)
	}
}

// TestParseCmsgsShort: a control message shorter than its value (one byte
// short of IP_ORIGDSTADDR's sockaddr_in, or of IP_TTL's, SO_RXQ_OVFL's or
// UDP_GRO's u32) is skipped, not read past, and the message after it is
// still read. The kernel sends whole values; these are forged.
func TestParseCmsgsShort(t *testing.T) {
	for _, tc := range []struct {
		name       string
		level, typ int32
		len        int
	}{
		{"IP_ORIGDSTADDR", unix.IPPROTO_IP, unix.IP_ORIGDSTADDR, unix.SizeofSockaddrInet4 - 1},
		{"IP_TTL", unix.IPPROTO_IP, unix.IP_TTL, 3},
		{"SO_RXQ_OVFL", unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 3},
		{"UDP_GRO", unix.SOL_UDP, unix.UDP_GRO, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := make([]byte, unix.CmsgSpace(tc.len)+unix.CmsgSpace(1))
			h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
			h.Level, h.Type = tc.level, tc.typ
			h.SetLen(unix.CmsgLen(tc.len))
			for i := range tc.len {
				b[unix.CmsgLen(0)+i] = 0x7F
			}
			h = (*unix.Cmsghdr)(unsafe.Pointer(&b[unix.CmsgSpace(tc.len)]))
			h.Level, h.Type = unix.IPPROTO_IP, unix.IP_TOS
			h.SetLen(unix.CmsgLen(1))
			b[unix.CmsgSpace(tc.len)+unix.CmsgLen(0)] = 0xB8
			var m rxMeta
			require.NotPanics(t, func() { parseCmsgs(b, &m) }, "parseCmsgs read a short %s", tc.name)
			require.Equal(t, rxMeta{tos: 0xB8}, m, "a short %s is skipped, the IP_TOS after it read", tc.name)
		})
	}
}
