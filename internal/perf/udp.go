//go:build linux

package perf

import (
	"fmt"
	"net"
	"syscall"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

// UDP is an Endpoint over a net.UDPConn, the baseline a Go program would
// otherwise use, with golang.org/x/net/ipv4 for the batch calls
// (sendmmsg, recvmmsg).
type UDP struct {
	C         *net.UDPConn // the socket
	p         *ipv4.PacketConn
	to        *net.UDPAddr
	connected bool // C is connected to to: Write, not WriteToUDP
	ms        []ipv4.Message
}

// NewUDP returns an endpoint over c that sends to to (unconnected:
// WriteToUDP) or, with connected, to the peer c is connected to (Write).
func NewUDP(c *net.UDPConn, to *net.UDPAddr, connected bool) *UDP {
	e := &UDP{C: c, p: ipv4.NewPacketConn(c), to: to, connected: connected}
	e.messages(batchSlots)
	return e
}

// ListenUDP is a multicast receiver: net.ListenMulticastUDP on ifi, with
// IP_MULTICAST_ALL off and, for rcvbuf > 0, SO_RCVBUF rcvbuf.
//
// net.ListenMulticastUDP binds 0.0.0.0:port, and Linux then delivers
// every group any socket on the host joined at that port
// (IP_MULTICAST_ALL): a ping-pong client would read its own requests
// (both groups on one port) as answers. With it off the socket hears only
// its own group, as the software backend's sockets do.
func ListenUDP(ifi *net.Interface, group *net.UDPAddr, rcvbuf int) (*UDP, error) {
	c, err := net.ListenMulticastUDP("udp4", ifi, group)
	if err != nil {
		return nil, err
	}
	if err := setsockoptInt(c, unix.IPPROTO_IP, unix.IP_MULTICAST_ALL, 0); err != nil {
		c.Close()
		return nil, fmt.Errorf("udp: IP_MULTICAST_ALL: %w", err)
	}
	if rcvbuf > 0 {
		if err := c.SetReadBuffer(rcvbuf); err != nil {
			c.Close()
			return nil, fmt.Errorf("udp: SO_RCVBUF %d: %w", rcvbuf, err)
		}
	}
	return NewUDP(c, nil, false), nil
}

// DialUDP is a multicast sender from laddr (nil IP on a loopback ifi:
// 127.0.0.1) to group through ifi (IP_MULTICAST_IF, loopback on):
// connected to the group (net.DialUDP + Write, as most Go multicast
// senders are) or not (WriteToUDP).
func DialUDP(ifi *net.Interface, laddr, group *net.UDPAddr, connected bool) (*UDP, error) {
	la := &net.UDPAddr{}
	if laddr != nil {
		*la = *laddr
	}
	if la.IP == nil && ifi.Flags&net.FlagLoopback != 0 {
		la.IP = net.IPv4(127, 0, 0, 1)
	}
	var c *net.UDPConn
	var err error
	if connected {
		c, err = dialMulticast(la, group, ifi)
	} else {
		c, err = net.ListenUDP("udp4", la)
	}
	if err != nil {
		return nil, err
	}
	e := NewUDP(c, group, connected)
	if err = e.p.SetMulticastInterface(ifi); err == nil {
		err = e.p.SetMulticastLoopback(true)
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("udp: IP_MULTICAST_IF %s: %w", ifi.Name, err)
	}
	return e, nil
}

// dialMulticast is net.DialUDP from laddr to group, with IP_MULTICAST_IF
// set to ifi before the connect: the kernel routes a multicast connect by
// it, so the socket never takes the default route's interface.
func dialMulticast(laddr, group *net.UDPAddr, ifi *net.Interface) (*net.UDPConn, error) {
	d := net.Dialer{LocalAddr: laddr, Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptIPMreqn(int(fd), unix.IPPROTO_IP, unix.IP_MULTICAST_IF, &unix.IPMreqn{Ifindex: int32(ifi.Index)})
		}); err != nil {
			return err
		}
		if serr != nil {
			return fmt.Errorf("udp: IP_MULTICAST_IF %s: %w", ifi.Name, serr)
		}
		return nil
	}}
	c, err := d.Dial("udp4", group.String())
	if err != nil {
		return nil, err
	}
	return c.(*net.UDPConn), nil
}

// Loopback is the interface runs default to: lo, or else the first
// interface flagged loopback.
func Loopback() (*net.Interface, error) {
	lo, err := net.InterfaceByName("lo")
	if err == nil {
		return lo, nil
	}
	ifs, err2 := net.Interfaces()
	if err2 != nil {
		return nil, err
	}
	for i := range ifs {
		if ifs[i].Flags&net.FlagLoopback != 0 {
			return &ifs[i], nil
		}
	}
	return nil, err
}

// Send sends b: Write when connected, else WriteToUDP.
func (e *UDP) Send(b []byte) error {
	var err error
	if e.connected {
		_, err = e.C.Write(b)
	} else {
		_, err = e.C.WriteToUDP(b, e.to)
	}
	return err
}

// messages returns n of the endpoint's batch messages, grown to n if
// they are fewer.
func (e *UDP) messages(n int) []ipv4.Message {
	for len(e.ms) < n {
		m := ipv4.Message{Buffers: make([][]byte, 1)}
		if !e.connected && e.to != nil {
			m.Addr = e.to
		}
		e.ms = append(e.ms, m)
	}
	return e.ms[:n]
}

// SendBatch sends bs with x/net/ipv4's WriteBatch (sendmmsg), as many
// calls as it takes.
func (e *UDP) SendBatch(bs [][]byte) error {
	ms := e.messages(len(bs))
	for i := range ms {
		ms[i].Buffers[0] = bs[i]
	}
	for len(ms) > 0 {
		n, err := e.p.WriteBatch(ms, 0)
		if err != nil {
			return err
		}
		ms = ms[n:]
	}
	return nil
}

// Recv reads one datagram with ReadFromUDP.
func (e *UDP) Recv(b []byte) (int, error) { n, _, err := e.C.ReadFromUDP(b); return n, err }

// RecvBatch reads up to len(bufs) datagrams with x/net/ipv4's ReadBatch
// (recvmmsg).
func (e *UDP) RecvBatch(bufs [][]byte, ns []int) (int, error) {
	ms := e.messages(len(bufs))
	for i := range ms {
		ms[i].Buffers[0] = bufs[i]
	}
	n, err := e.p.ReadBatch(ms, 0)
	for i := range n {
		ns[i] = ms[i].N
	}
	return n, err
}

// SetReadDeadline sets the socket's read deadline.
func (e *UDP) SetReadDeadline(t time.Time) error { return e.C.SetReadDeadline(t) }

// Close closes the socket.
func (e *UDP) Close() error { return e.C.Close() }

// MTU is the largest UDP payload over IPv4.
func (e *UDP) MTU() int { return 65507 }

// RcvBuf is the socket's SO_RCVBUF as getsockopt reports it: twice what
// the kernel granted, for its bookkeeping.
func (e *UDP) RcvBuf() (int, error) {
	rc, err := e.C.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var serr error
	if err := rc.Control(func(fd uintptr) { n, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF) }); err != nil {
		return 0, err
	}
	return n, serr
}

// setsockoptInt sets an integer socket option of c's socket.
func setsockoptInt(c *net.UDPConn, level, name, v int) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), level, name, v) }); err != nil {
		return err
	}
	return serr
}
