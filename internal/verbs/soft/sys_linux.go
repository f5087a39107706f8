package soft

import (
	"encoding/binary"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mmsghdr is struct mmsghdr: x/sys/unix has the syscall numbers but no
// type or wrapper for recvmmsg/sendmmsg. Go pads it to the C layout.
type mmsghdr struct {
	Hdr unix.Msghdr
	Len uint32
}

// recvmmsg is only called with MSG_DONTWAIT: it never blocks, so it
// skips the scheduler's syscall bookkeeping (RawSyscall6).
func recvmmsg(fd int, msgs []mmsghdr, flags int) (int, error) {
	for {
		n, _, e := unix.RawSyscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(&msgs[0])), uintptr(len(msgs)), uintptr(flags), 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return 0, e
		}
		return int(n), nil
	}
}

// recvmsgOne reads one datagram into m with recvmsg, which costs a
// little less than a one-slot recvmmsg; it returns 1 or an error, as
// recvmmsg would.
func recvmsgOne(fd int, m *mmsghdr, flags int) (int, error) {
	for {
		n, _, e := unix.RawSyscall(unix.SYS_RECVMSG, uintptr(fd), uintptr(unsafe.Pointer(&m.Hdr)), uintptr(flags))
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return 0, e
		}
		m.Len = uint32(n)
		return 1, nil
	}
}

// recvfromOne reads one datagram into the single iovec of m with
// recvfrom, filling m's name, length and flags as recvmsg would (no
// control messages). MSG_TRUNC makes the kernel return the datagram's full length,
// so a datagram longer than the buffer is reported truncated, as recvmsg
// reports it.
func recvfromOne(fd int, m *mmsghdr, flags int) (int, error) {
	iov := m.Hdr.Iov
	for {
		nl := uint32(unix.SizeofSockaddrInet4)
		n, _, e := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(iov.Base)), uintptr(iov.Len),
			uintptr(flags|unix.MSG_TRUNC), uintptr(unsafe.Pointer(m.Hdr.Name)), uintptr(unsafe.Pointer(&nl)))
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return 0, e
		}
		m.Hdr.Namelen = nl
		var f int32 // msg_flags, written whole as recvmsg writes it
		if uint64(n) > uint64(iov.Len) {
			n = uintptr(iov.Len)
			f = unix.MSG_TRUNC
		}
		m.Hdr.Flags = f
		m.Len = uint32(n)
		return 1, nil
	}
}

// epollWait polls an epoll set without blocking (timeout 0).
func epollWait(epfd int, evs []unix.EpollEvent) (int, error) {
	n, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&evs[0])), uintptr(len(evs)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// sendmmsg sends without the scheduler's syscall bookkeeping (a UDP send
// that finds room in the socket buffer never blocks). The socket is
// non-blocking; only when its buffer is full does sendmmsg wait for room
// in a blocking poll, which lets the scheduler run other goroutines
// meanwhile, and try again.
func sendmmsg(fd int, msgs []mmsghdr, flags int) (int, error) {
	for {
		n, _, e := unix.RawSyscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&msgs[0])), uintptr(len(msgs)), uintptr(flags|unix.MSG_DONTWAIT), 0, 0)
		if e == unix.EAGAIN {
			e = waitWritable(fd)
			if e == 0 {
				continue
			}
		}
		if e != 0 {
			return 0, e
		}
		return int(n), nil
	}
}

// sendto sends one datagram to the sockaddr_in at name, as sendmmsg
// does: without the bookkeeping, waiting for room only when the buffer is
// full.
func sendto(fd int, b []byte, name *byte) error {
	for {
		_, _, e := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), unix.MSG_DONTWAIT, uintptr(unsafe.Pointer(name)), unix.SizeofSockaddrInet4)
		if e == unix.EAGAIN {
			e = waitWritable(fd)
			if e == 0 {
				continue
			}
		}
		if e != 0 {
			return e
		}
		return nil
	}
}

// waitWritable waits in a blocking poll for room in fd's send buffer.
func waitWritable(fd int) unix.Errno {
	pfd := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
	_, err := unix.Poll(pfd[:], -1) // ppoll where there is no poll (arm64)
	if e, ok := err.(unix.Errno); ok && e != unix.EINTR {
		return e
	}
	return 0
}

func setIov(iov *unix.Iovec, b []byte) {
	if len(b) == 0 {
		iov.Base = nil
		iov.SetLen(0)
		return
	}
	iov.Base = &b[0]
	iov.SetLen(len(b))
}

// rxMeta is what the control messages of one received datagram say.
type rxMeta struct {
	dst     [4]byte // IP_ORIGDSTADDR: the header's destination
	ttl     uint8
	tos     uint8
	ovfl    uint32 // SO_RXQ_OVFL: the socket's cumulative drops
	hasOvfl bool
	seg     int // UDP_GRO: a coalesced read's segment size (gro.go)
}

func cmsgAlign(n int) int {
	const a = int(unsafe.Sizeof(uintptr(0)))
	return (n + a - 1) &^ (a - 1)
}

// parseCmsgs reads IP_ORIGDSTADDR, IP_TTL, IP_TOS, SO_RXQ_OVFL and
// UDP_GRO without allocating.
func parseCmsgs(b []byte, m *rxMeta) {
	*m = rxMeta{}
	hlen := cmsgAlign(unix.SizeofCmsghdr)
	for len(b) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
		l := int(h.Len)
		if l < hlen || l > len(b) {
			return
		}
		data := b[hlen:l]
		switch {
		case h.Level == unix.IPPROTO_IP && h.Type == unix.IP_ORIGDSTADDR && len(data) >= unix.SizeofSockaddrInet4:
			m.dst = (*unix.RawSockaddrInet4)(unsafe.Pointer(&data[0])).Addr
		case h.Level == unix.IPPROTO_IP && h.Type == unix.IP_TTL && len(data) >= 4:
			m.ttl = uint8(binary.NativeEndian.Uint32(data))
		case h.Level == unix.IPPROTO_IP && h.Type == unix.IP_TOS && len(data) >= 1:
			m.tos = data[0]
		case h.Level == unix.SOL_SOCKET && h.Type == unix.SO_RXQ_OVFL && len(data) >= 4:
			m.ovfl = binary.NativeEndian.Uint32(data)
			m.hasOvfl = true
		case h.Level == unix.SOL_UDP && h.Type == unix.UDP_GRO && len(data) >= 4:
			m.seg = int(binary.NativeEndian.Uint32(data))
		}
		next := cmsgAlign(l)
		if next >= len(b) {
			return
		}
		b = b[next:]
	}
}

func ntohs(p uint16) uint16 {
	var b [2]byte
	*(*uint16)(unsafe.Pointer(&b[0])) = p
	return binary.BigEndian.Uint16(b[:])
}

func htons(p uint16) uint16 { return ntohs(p) }
