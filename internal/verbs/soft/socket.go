//go:build linux

package soft

import (
	"errors"
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/roce"
	"github.com/go-rdma/rdmanet/internal/verbs"
)

// The QP's UDP sockets: the options each gets, opening and binding the
// unicast one, and the socket buffers.

type sockopt struct {
	level, name, value int
	what               string
}

// noFd stands for a socket or epoll set not open, or not made (beside an
// error); what holds fds closes only those >= 0.
const noFd = -1

// udpSocket makes an unbound UDP socket with opts.
func udpSocket(opts []sockopt) (int, error) {
	// O_NONBLOCK: every read and send is non-blocking anyway, and a
	// blocking UDP socket's poll (the channel's epoll asks it on every
	// wait) walks the receive queue to check the first datagram's length
	// (first_packet_length); a non-blocking one's does not.
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.IPPROTO_UDP)
	if err != nil {
		return noFd, os.NewSyscallError("socket", err)
	}
	if err := setSockopts(fd, opts); err != nil {
		unix.Close(fd)
		return noFd, err
	}
	return fd, nil
}

// optOn is the value that turns a boolean socket option on: Linux reads
// any non-zero int as on (0 is off).
const optOn = 1

// setBoolOpt turns the boolean socket option name at level on or off.
func setBoolOpt(fd, level, name int, on bool) error {
	v := 0
	if on {
		v = optOn
	}
	return unix.SetsockoptInt(fd, level, name, v)
}

// setSockopts sets opts on fd.
func setSockopts(fd int, opts []sockopt) error {
	for _, o := range opts {
		if err := unix.SetsockoptInt(fd, o.level, o.name, o.value); err != nil {
			return fmt.Errorf("setsockopt %s: %w", o.what, err)
		}
	}
	return nil
}

var rxOpts = []sockopt{
	{unix.SOL_SOCKET, unix.SO_REUSEADDR, optOn, "SO_REUSEADDR"},
	// The destination address (which group; the ICRC covers it) comes
	// from IP_ORIGDSTADDR, a copy of the header's: IP_PKTINFO would also
	// work out a source address for replies with a FIB lookup per
	// datagram, which costs more than all the other control messages.
	{unix.IPPROTO_IP, unix.IP_RECVORIGDSTADDR, optOn, "IP_RECVORIGDSTADDR"},
	{unix.SOL_SOCKET, unix.SO_RXQ_OVFL, optOn, "SO_RXQ_OVFL"},
	{unix.SOL_SOCKET, unix.SO_RCVBUF, sockBufBytes, "SO_RCVBUF"},
}

// grhOpts ask for the TTL and TOS the GRH's IPv4 header shows, unless
// the QP was created with GRHAddressesOnly: about 0.1 µs a datagram.
var grhOpts = []sockopt{
	{unix.IPPROTO_IP, unix.IP_RECVTTL, optOn, "IP_RECVTTL"},
	{unix.IPPROTO_IP, unix.IP_RECVTOS, optOn, "IP_RECVTOS"},
}

// qpSockopts are the options of a QP's unicast socket (tx: it sends and
// receives) and multicast socket (mc).
func qpSockopts(cfg verbs.QPConfig) (tx, mc []sockopt) {
	rx := rxOpts[:len(rxOpts):len(rxOpts)]
	if !cfg.GRHAddressesOnly {
		rx = append(rx, grhOpts...)
	}
	uniRx := rx
	if cfg.GRHAddressesOnly {
		// Every read of the unicast socket is bare: its datagrams are
		// for the address it is bound to, and SO_MEMINFO counts drops.
		uniRx = withoutCmsgs(rx)
	}
	// IP_MULTICAST_LOOP and IP_MULTICAST_TTL are left as a new socket
	// has them, 1 and 1 (Linux's defaults, no sysctl changes them).
	tx = append(uniRx[:len(uniRx):len(uniRx)],
		sockopt{unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO, "IP_MTU_DISCOVER"},
		sockopt{unix.SOL_SOCKET, unix.SO_SNDBUF, sockBufBytes, "SO_SNDBUF"},
	)
	mcRx := rx
	if cfg.GRHAddressesOnly {
		// Drops are read with SO_MEMINFO; IP_RECVORIGDSTADDR is
		// switched as reads need it (recvCQ.mcOrigDst).
		mcRx = withoutOpt(rx, unix.SOL_SOCKET, unix.SO_RXQ_OVFL)
	}
	mc = append(mcRx[:len(mcRx):len(mcRx)],
		sockopt{unix.IPPROTO_IP, unix.IP_MULTICAST_ALL, 0, "IP_MULTICAST_ALL"})
	return tx, mc
}

// openUnicast makes the unicast socket, bound to the QP's address, the
// one every send goes out of.
func (q *QP) openUnicast(opts []sockopt) error {
	// The socket resolve made for Bind, where the ID still has it.
	q.uniFd, q.id.r.sock = q.id.r.sock, -1
	if q.uniFd < 0 {
		var err error
		if q.uniFd, err = udpSocket(nil); err != nil {
			return err
		}
	}
	if err := setSockopts(q.uniFd, opts); err != nil {
		return err
	}
	var err error
	if err = bindRoCE(q.uniFd, q.unicast); err != nil {
		return err
	}
	// IP_TRANSPARENT, where the process may set it (CAP_NET_ADMIN or
	// CAP_NET_RAW in the network namespace: root, or a namespace of its
	// own), spares each send the kernel's check that the source address
	// is local: 127.q.q.q is no interface's address, so the check falls
	// back to a FIB lookup, about 0.13 µs a datagram. The address is
	// local either way, and nothing else changes; without the right the
	// option is left off.
	setBoolOpt(q.uniFd, unix.IPPROTO_IP, unix.IP_TRANSPARENT, true)
	mreq := &unix.IPMreqn{Address: q.unicast, Ifindex: int32(q.ifindex)}
	if err = unix.SetsockoptIPMreqn(q.uniFd, unix.IPPROTO_IP, unix.IP_MULTICAST_IF, mreq); err != nil {
		return fmt.Errorf("setsockopt IP_MULTICAST_IF: %w", err)
	}
	return nil
}

// bindRoCE binds fd to addr:4791. EADDRINUSE there means another socket
// holds the port without SO_REUSEADDR: often the kernel's Soft-RoCE's.
func bindRoCE(fd int, addr [4]byte) error {
	return bindError(addr, unix.Bind(fd, &unix.SockaddrInet4{Port: roce.UDPPort, Addr: addr}))
}

// bindError says what a failed bind to addr:4791 means: for EADDRINUSE,
// who holds the port (portHolder).
func bindError(addr [4]byte, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EADDRINUSE):
		return fmt.Errorf("bind %v:%d: %w (%s)", net.IP(addr[:]), roce.UDPPort, err, portHolder().why())
	}
	return fmt.Errorf("bind %v:%d: %w", net.IP(addr[:]), roce.UDPPort, err)
}

// withoutCmsgs is opts without the control messages bare reads do not
// use.
func withoutCmsgs(opts []sockopt) []sockopt {
	return withoutOpt(withoutOpt(opts, unix.IPPROTO_IP, unix.IP_RECVORIGDSTADDR), unix.SOL_SOCKET, unix.SO_RXQ_OVFL)
}

// withoutOpt is opts without the option level/name.
func withoutOpt(opts []sockopt, level, name int) []sockopt {
	var out []sockopt
	for _, o := range opts {
		if o.level != level || o.name != name {
			out = append(out, o)
		}
	}
	return out
}

// bufferFds are the sockets whose SO_RCVBUF (recv) or SO_SNDBUF a
// socket buffer call sets: both receive; the unicast socket sends. An fd
// is -1 once the QP is closed.
func (q *QP) bufferFds(recv bool) (opt int, fds []int) {
	if recv {
		return unix.SO_RCVBUF, []int{q.mcFd, q.uniFd}
	}
	return unix.SO_SNDBUF, []int{q.uniFd}
}

// SetSocketBuffer sets SO_RCVBUF of both sockets (recv) or SO_SNDBUF of
// the unicast one to bytes, as net.UDPConn's SetReadBuffer and
// SetWriteBuffer do. The sockets stay the QP's for its life (Reset keeps
// them), so the size holds until it is set again.
func (q *QP) SetSocketBuffer(recv bool, bytes int) (int, error) {
	opt, fds := q.bufferFds(recv)
	for _, fd := range fds {
		if fd < 0 {
			continue
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, opt, bytes); err != nil {
			return q.SocketBuffer(recv), os.NewSyscallError("setsockopt", err)
		}
	}
	return q.SocketBuffer(recv), nil
}

// SocketBuffer returns half the smallest SO_RCVBUF (recv) or SO_SNDBUF
// getsockopt reports for the sockets SetSocketBuffer sets.
func (q *QP) SocketBuffer(recv bool) int {
	opt, fds := q.bufferFds(recv)
	least := 0
	for _, fd := range fds {
		if fd < 0 {
			continue
		}
		if n, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, opt); err == nil && (least == 0 || n < least) {
			least = n
		}
	}
	return least / 2
}
