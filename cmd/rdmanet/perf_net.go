//go:build linux

package main

import (
	"context"
	"fmt"
	"net"
	"syscall"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// perfEP is one conn of a perf run: it sends to one group, or receives
// from one group. rdmanet and the net.UDPConn baseline both implement it.
type perfEP interface {
	send(b []byte) error
	sendBatch(bs [][]byte) error
	recv(b []byte) (int, error)
	// recvBatch reads up to len(bufs) datagrams, their lengths into ns.
	recvBatch(bufs [][]byte, ns []int) (int, error)
	setReadDeadline(t time.Time) error
	close() error
	mtu() int
}

// perfNet makes the conns of a run: rdmanet ones, or UDP ones for the
// baseline, all on the same interface.
type perfNet struct {
	cfg *perfConfig
	ifi *net.Interface // nil: loopback (rdmanet); lo for UDP
	// Filled by the first conn: what the run reports.
	backend, device string
	rcvbuf          int // the first receiver's SO_RCVBUF (getsockopt)
}

func (pn *perfNet) listenConfig(sendOnly bool) rdmanet.ListenConfig {
	c := pn.cfg
	if sendOnly && c.sender == senderMember {
		// What a newcomer writes: only the address and device named.
		return rdmanet.ListenConfig{Backend: c.backend, LocalAddr: c.bindIP, Device: c.device}
	}
	lc := rdmanet.ListenConfig{Backend: c.backend, LocalAddr: c.bindIP, Device: c.device,
		SendOnly: sendOnly, DisableLoopback: true, RecvDepth: c.depth}
	if !sendOnly {
		lc.Spin = c.spin
	}
	if sendOnly {
		lc.RecvDepth = 16 // receives nothing
	}
	return lc
}

// sender returns a conn that sends to group; receiver one that receives
// from it.
func (pn *perfNet) sender(group *net.UDPAddr) (perfEP, error)   { return pn.open(group, true) }
func (pn *perfNet) receiver(group *net.UDPAddr) (perfEP, error) { return pn.open(group, false) }

func (pn *perfNet) open(group *net.UDPAddr, sendOnly bool) (perfEP, error) {
	if pn.cfg.baseline == "udp" {
		return pn.openUDP(group, sendOnly)
	}
	lc := pn.listenConfig(sendOnly)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := lc.ListenMulticast(ctx, "rdma4", pn.ifi, group)
	if err != nil {
		return nil, err
	}
	ga, err := c.GroupAddr(group)
	if err != nil {
		c.Close()
		return nil, err
	}
	if pn.backend == "" {
		b := c.Backend()
		pn.backend = b.Name
		pn.device = b.Device
		if b.Netdev != "" && b.Netdev != b.Device {
			pn.device += " (" + b.Netdev + ")"
		}
	}
	if !sendOnly && pn.rcvbuf == 0 && c.Backend().Name == rdmanet.BackendSoftware {
		pn.rcvbuf = 2 * c.ReadBuffer() // the grant; getsockopt (RcvBuf's unit) reports twice it
	}
	n := max(pn.cfg.batch, 1)
	return &rdmaPerfEP{c: c, group: group, ga: ga, ms: make([]rdmanet.Message, n)}, nil
}

type rdmaPerfEP struct {
	c     *rdmanet.Conn
	group *net.UDPAddr
	ga    rdmanet.Addr
	ms    []rdmanet.Message
}

func (e *rdmaPerfEP) send(b []byte) error { _, err := e.c.WriteTo(b, e.group); return err }

func (e *rdmaPerfEP) sendBatch(bs [][]byte) error {
	if cap(e.ms) < len(bs) {
		e.ms = make([]rdmanet.Message, len(bs))
	}
	ms := e.ms[:len(bs)]
	for i, b := range bs {
		ms[i].Buffer, ms[i].Addr = b, e.ga
	}
	_, err := e.c.WriteBatch(ms)
	return err
}

func (e *rdmaPerfEP) recv(b []byte) (int, error) { n, _, err := e.c.ReadFromAddr(b); return n, err }

func (e *rdmaPerfEP) recvBatch(bufs [][]byte, ns []int) (int, error) {
	if cap(e.ms) < len(bufs) {
		e.ms = make([]rdmanet.Message, len(bufs))
	}
	ms := e.ms[:len(bufs)]
	for i, b := range bufs {
		ms[i].Buffer = b
	}
	n, err := e.c.ReadBatch(ms)
	for i := range n {
		ns[i] = ms[i].N
	}
	return n, err
}

func (e *rdmaPerfEP) setReadDeadline(t time.Time) error { return e.c.SetReadDeadline(t) }
func (e *rdmaPerfEP) close() error                      { return e.c.Close() }
func (e *rdmaPerfEP) mtu() int                          { return e.c.MTU() }

// ---- the net.UDPConn baseline ----

// udpPerfEP is a multicast receiver (net.ListenMulticastUDP on the
// interface) or a sender with IP_MULTICAST_IF set to the interface,
// connected to the group (net.DialUDP + Write) or not (WriteToUDP), with
// x/net/ipv4 for the batch calls.
type udpPerfEP struct {
	c         *net.UDPConn
	p         *ipv4.PacketConn
	group     *net.UDPAddr
	connected bool
	ms        []ipv4.Message
}

func (pn *perfNet) openUDP(group *net.UDPAddr, sendOnly bool) (perfEP, error) {
	ifi := pn.ifi
	if ifi == nil {
		lo, err := loopbackInterface()
		if err != nil {
			return nil, err
		}
		ifi = lo
	}
	if pn.backend == "" {
		pn.backend, pn.device = "udp", ifi.Name
	}
	connected := sendOnly && pn.cfg.sender != senderUnconnected
	e := &udpPerfEP{group: group, connected: connected, ms: make([]ipv4.Message, max(pn.cfg.batch, 1))}
	for i := range e.ms {
		e.ms[i].Buffers = make([][]byte, 1)
		if !connected {
			e.ms[i].Addr = group
		}
	}
	var err error
	if sendOnly {
		laddr := &net.UDPAddr{IP: pn.cfg.bindIP}
		if laddr.IP == nil && ifi.Flags&net.FlagLoopback != 0 {
			laddr.IP = net.IPv4(127, 0, 0, 1)
		}
		if connected {
			e.c, err = dialMulticast(laddr, group, ifi)
		} else {
			e.c, err = net.ListenUDP("udp4", laddr)
		}
		if err != nil {
			return nil, err
		}
		e.p = ipv4.NewPacketConn(e.c)
		if err = e.p.SetMulticastInterface(ifi); err == nil {
			err = e.p.SetMulticastLoopback(true)
		}
		if err != nil {
			e.c.Close()
			return nil, fmt.Errorf("udp: IP_MULTICAST_IF %s: %w", ifi.Name, err)
		}
		return e, nil
	}
	if e.c, err = net.ListenMulticastUDP("udp4", ifi, group); err != nil {
		return nil, err
	}
	// net.ListenMulticastUDP binds 0.0.0.0:port, and Linux then delivers
	// every group any socket on the host joined at that port
	// (IP_MULTICAST_ALL): a ping-pong client would read its own requests
	// (both groups share the port) as answers. Only our group, as the
	// software backend's sockets.
	if err := disableMulticastAll(e.c); err != nil {
		e.c.Close()
		return nil, fmt.Errorf("udp: IP_MULTICAST_ALL: %w", err)
	}
	if pn.cfg.rcvbuf > 0 {
		if err := e.c.SetReadBuffer(pn.cfg.rcvbuf); err != nil {
			e.c.Close()
			return nil, fmt.Errorf("udp: SO_RCVBUF %d: %w", pn.cfg.rcvbuf, err)
		}
	}
	if pn.rcvbuf == 0 {
		if pn.rcvbuf, err = sockoptInt(e.c, unix.SOL_SOCKET, unix.SO_RCVBUF); err != nil {
			e.c.Close()
			return nil, fmt.Errorf("udp: getsockopt SO_RCVBUF: %w", err)
		}
	}
	e.p = ipv4.NewPacketConn(e.c)
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

// loopbackInterface is the interface every run defaults to.
func loopbackInterface() (*net.Interface, error) {
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

func (e *udpPerfEP) send(b []byte) error {
	var err error
	if e.connected {
		_, err = e.c.Write(b)
	} else {
		_, err = e.c.WriteToUDP(b, e.group)
	}
	return err
}

func (e *udpPerfEP) sendBatch(bs [][]byte) error {
	for len(bs) > 0 {
		k := min(len(bs), len(e.ms))
		ms := e.ms[:k]
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
		bs = bs[k:]
	}
	return nil
}

func (e *udpPerfEP) recv(b []byte) (int, error) { n, _, err := e.c.ReadFromUDP(b); return n, err }

func (e *udpPerfEP) recvBatch(bufs [][]byte, ns []int) (int, error) {
	k := min(len(bufs), len(e.ms))
	ms := e.ms[:k]
	for i := range ms {
		ms[i].Buffers[0] = bufs[i]
	}
	n, err := e.p.ReadBatch(ms, 0)
	for i := range n {
		ns[i] = ms[i].N
	}
	return n, err
}

func (e *udpPerfEP) setReadDeadline(t time.Time) error { return e.c.SetReadDeadline(t) }
func (e *udpPerfEP) close() error                      { return e.c.Close() }
func (e *udpPerfEP) mtu() int                          { return 65507 }

// sockoptInt reads an integer socket option of c's socket.
func sockoptInt(c *net.UDPConn, level, name int) (int, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var serr error
	if err := rc.Control(func(fd uintptr) { n, serr = unix.GetsockoptInt(int(fd), level, name) }); err != nil {
		return 0, err
	}
	return n, serr
}

// disableMulticastAll turns IP_MULTICAST_ALL off on c's socket.
func disableMulticastAll(c *net.UDPConn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_MULTICAST_ALL, 0)
	}); err != nil {
		return err
	}
	return serr
}
