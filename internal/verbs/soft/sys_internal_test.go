//go:build linux

package soft

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// The syscall wrappers count nothing beside an error: a read that failed
// took no datagram, a send that failed sent none (their comments: "1 or
// an error", "as recvmmsg would"). Each is tried on a socket with nothing
// to read (EAGAIN) and on no fd at all (EBADF).
func TestSyscallWrappersCountNothingOnError(t *testing.T) {
	sock, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(sock) })
	require.NoError(t, unix.Bind(sock, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))

	buf := make([]byte, 64)
	var name unix.RawSockaddrInet4
	msgs := make([]mmsghdr, 2)
	for i := range msgs {
		var iov unix.Iovec
		setIov(&iov, buf)
		msgs[i].Hdr.Iov = &iov
		msgs[i].Hdr.SetIovlen(1)
		msgs[i].Hdr.Name = (*byte)(unsafe.Pointer(&name))
		msgs[i].Hdr.Namelen = unix.SizeofSockaddrInet4
	}
	evs := make([]unix.EpollEvent, 1)
	for _, c := range []struct {
		fd   int
		want unix.Errno
	}{{sock, unix.EAGAIN}, {-1, unix.EBADF}} {
		n, err := recvmmsg(c.fd, msgs, unix.MSG_DONTWAIT)
		require.Equal(t, []any{0, error(c.want)}, []any{n, err}, "recvmmsg of fd %d", c.fd)
		n, err = recvmsgOne(c.fd, &msgs[0], unix.MSG_DONTWAIT)
		require.Equal(t, []any{0, error(c.want)}, []any{n, err}, "recvmsgOne of fd %d", c.fd)
		n, err = recvfromOne(c.fd, &msgs[0], unix.MSG_DONTWAIT)
		require.Equal(t, []any{0, error(c.want)}, []any{n, err}, "recvfromOne of fd %d", c.fd)
	}
	n, err := epollWait(-1, evs)
	require.Equal(t, []any{0, error(unix.EBADF)}, []any{n, err}, "epollWait of fd -1")
	n, err = sendmmsg(-1, msgs, 0)
	require.Equal(t, []any{0, error(unix.EBADF)}, []any{n, err}, "sendmmsg of fd -1")
}
