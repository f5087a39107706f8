package soft

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/infiniband"
	"github.com/go-rdma/rdmanet/internal/verbs"
)

// ID is a software rdma_cm_id bound to the one port of a software device.
type ID struct {
	mu      sync.Mutex
	r       *resolved
	bind    verbs.Binding
	qp      *QP
	qpn     uint32 // reserved by ev's socket; the QP's once it exists
	ev      eventChannel
	closed  bool
	removed atomic.Bool // a DEVICE_REMOVAL was injected
}

var _ verbs.ID = (*ID)(nil)

func newID(r *resolved) (*ID, error) {
	// The socket that reserves the QPN (one QP per ID) is also the
	// event channel: one fd for both.
	qpn, fd, err := reserveFreeQPN()
	if err != nil {
		return nil, fmt.Errorf("soft: rdma_create_id: %w", err)
	}
	id := &ID{r: r, qpn: qpn}
	id.ev.fd, id.ev.self = fd, qpnSockaddr(qpn)
	id.bind = verbs.Binding{
		Device:    devicePrefix + r.ifi.Name,
		Port:      portNum,
		GIDIndex:  r.gidIdx,
		GID:       infiniband.GIDFromNetIP(r.ip),
		GIDType:   infiniband.GIDTypeRoCEv2,
		IP:        r.ip,
		Netdev:    r.ifi.Name,
		LinkLayer: infiniband.LinkLayerEthernet,
		MTU:       r.mtu,
	}
	return id, nil
}

// Local is where the ID is bound. Once the QP exists, IP and GID are the
// QP's own unicast address, the source address of everything it sends and
// the GRH source its peers see: on loopback 127.q2.q1.q0 (the QPN's bytes),
// elsewhere the netdev's address.
func (id *ID) Local() verbs.Binding {
	id.mu.Lock()
	defer id.mu.Unlock()
	b := id.bind
	b.IP = append(net.IP(nil), b.IP...)
	return b
}

// CreateQP creates the UD QP with its CQs and channels (one per ID).
func (id *ID) CreateQP(cfg verbs.QPConfig) (verbs.QP, error) {
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.closed {
		return nil, fmt.Errorf("soft: ibv_create_qp: %w", verbs.ErrClosed)
	}
	if id.qp != nil {
		return nil, fmt.Errorf("soft: ibv_create_qp: the ID already has a QP")
	}
	qp, err := newQP(id, cfg)
	if err != nil {
		return nil, err
	}
	qp.noteCreated() // the device counters' base (counters.go)
	id.qp = qp
	ip := net.IP(qp.unicast[:])
	id.bind.IP = append(net.IP(nil), ip...)
	id.bind.GID = infiniband.GIDFromNetIP(ip)
	return qp, nil
}

// groupAddr returns the MGID and IPv4 group of g: an IPv4 group maps to
// ::ffff:a.b.c.d; a raw MGID must be such a mapped address here.
func groupAddr(g verbs.Group) (verbs.GID, [4]byte, error) {
	var a netip.Addr
	if !g.MGID.IsZero() {
		a = g.MGID.Addr()
		if !a.Is4() || !a.IsMulticast() {
			return verbs.GID{}, [4]byte{}, fmt.Errorf("soft: MGID %v is not an IPv4-mapped multicast MGID (::ffff:224.0.0.0/100): %w", g.MGID, verbs.ErrNotSupported)
		}
	} else {
		ip4 := g.IP.To4()
		if ip4 == nil {
			if g.IP != nil && g.IP.IsMulticast() {
				return verbs.GID{}, [4]byte{}, fmt.Errorf("soft: IPv6 group %v: IPv6 multicast groups are not supported on RoCE v2, as with rdma_cm (ENOTSUPP); use an IPv4 group (IPv6 groups need InfiniBand): %w", g.IP, verbs.ErrNotSupported)
			}
			return verbs.GID{}, [4]byte{}, fmt.Errorf("soft: join: %v is not a multicast group address", g.IP)
		}
		a = netip.AddrFrom4([4]byte(ip4))
		if !a.IsMulticast() {
			return verbs.GID{}, [4]byte{}, fmt.Errorf("soft: join: %v is not a multicast group address", g.IP)
		}
	}
	return infiniband.GIDFromIP(a), a.As4(), nil
}

// Join joins a group. A full member adds the IP membership on the bound
// netdev only (IP_ADD_MEMBERSHIP with its ifindex) and starts accepting
// the MGID; a send-only member joins nothing and receives nothing. Joining
// a group already joined returns its membership (a send-only member
// asking for full membership is upgraded).
func (id *ID) Join(ctx context.Context, g verbs.Group, opt verbs.JoinOptions) (verbs.Membership, error) {
	if err := ctx.Err(); err != nil {
		return verbs.Membership{}, err
	}
	mgid, grp, err := groupAddr(g)
	if err != nil {
		return verbs.Membership{}, err
	}
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.closed {
		return verbs.Membership{}, fmt.Errorf("soft: rdma_join_multicast: %w", verbs.ErrClosed)
	}
	if id.removed.Load() {
		return verbs.Membership{}, fmt.Errorf("soft: rdma_join_multicast: %w", verbs.ErrDeviceRemoved)
	}
	qp := id.qp
	if qp == nil {
		return verbs.Membership{}, fmt.Errorf("soft: rdma_join_multicast %v: create the QP first", mgid)
	}
	sendOnly, err := qp.join(grp, opt.SendOnly)
	if err != nil {
		return verbs.Membership{}, fmt.Errorf("soft: rdma_join_multicast %v: %w", mgid, err)
	}
	return verbs.Membership{
		MGID: mgid,
		AH: verbs.AHAttr{
			DGID:      mgid,
			SGIDIndex: uint8(id.bind.GIDIndex),
			HopLimit:  1,
			IsGlobal:  true,
			PortNum:   portNum,
		},
		RemoteQPN: verbs.MulticastQPN,
		QKey:      qp.qkey,
		MTU:       id.bind.MTU,
		SendOnly:  sendOnly,
	}, nil
}

// Leave drops the membership of mgid.
func (id *ID) Leave(mgid verbs.GID) error {
	_, grp, err := groupAddr(verbs.Group{MGID: mgid})
	if err != nil {
		return err
	}
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.closed {
		return fmt.Errorf("soft: rdma_leave_multicast: %w", verbs.ErrClosed)
	}
	if id.qp == nil {
		return fmt.Errorf("soft: rdma_leave_multicast %v: not joined", mgid)
	}
	if err := id.qp.leave(grp); err != nil {
		return fmt.Errorf("soft: rdma_leave_multicast %v: %w", mgid, err)
	}
	return nil
}

// Events is the ID's event channel. The software provider raises no
// events of its own; InjectEvent raises them in tests.
func (id *ID) Events() verbs.EventChannel { return &id.ev }

// Close leaves every group and closes every fd: the QP's sockets, the
// epoll sets and eventfd, the event channel that reserves the QPN. It is
// idempotent.
func (id *ID) Close() error {
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.closed {
		return nil
	}
	id.closed = true
	var err error
	if id.qp != nil {
		err = id.qp.close()
	}
	if e := id.ev.close(); err == nil {
		err = e
	}
	return err
}

// eventChannel is an ID's event channel: a queue and the ID's QPN
// reservation, an abstract unix datagram socket, that is readable while
// the queue is not empty (push sends it a datagram when the queue fills
// from empty; Next reads it dry when the queue empties). A datagram
// anyone else sends it only wakes a reader, who finds the queue empty.
type eventChannel struct {
	mu   sync.Mutex
	fd   int
	self *unix.SockaddrUnix
	q    []verbs.Event
}

var _ verbs.EventChannel = (*eventChannel)(nil)

func (c *eventChannel) Fd() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fd
}

func (c *eventChannel) Next() (verbs.Event, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd < 0 {
		return verbs.Event{}, false, fmt.Errorf("soft: rdma_get_cm_event: %w", verbs.ErrClosed)
	}
	if len(c.q) == 0 {
		drainSocket(c.fd)
		return verbs.Event{}, false, nil
	}
	ev := c.q[0]
	c.q = c.q[1:]
	if len(c.q) == 0 {
		drainSocket(c.fd)
	}
	return ev, true, nil
}

func (c *eventChannel) push(ev verbs.Event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd < 0 {
		return verbs.ErrClosed
	}
	c.q = append(c.q, ev)
	if len(c.q) > 1 {
		return nil // readable already
	}
	for {
		err := unix.Sendto(c.fd, []byte{0}, 0, c.self)
		switch err {
		case unix.EINTR:
			continue
		case unix.EAGAIN: // its queue is full: readable
			return nil
		}
		return err
	}
}

// drainSocket reads a datagram socket dry.
func drainSocket(fd int) {
	var b [1]byte
	for {
		_, _, err := unix.Recvfrom(fd, b[:], 0)
		if err != nil && err != unix.EINTR {
			return
		}
	}
}

func (c *eventChannel) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd < 0 {
		return nil
	}
	err := unix.Close(c.fd)
	c.fd = -1
	c.q = nil
	return err
}

func signalEventfd(fd int) error {
	var one = [8]byte{1}
	for {
		_, err := unix.Write(fd, one[:])
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN { // counter saturated: still readable
			return nil
		}
		return err
	}
}

// drainEventfd reads the eventfd's counter and returns it (0 when none).
func drainEventfd(fd int) (uint64, error) {
	var b [8]byte
	for {
		_, err := unix.Read(fd, b[:])
		switch err {
		case nil:
			return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
				uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56, nil
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return 0, nil
		}
		return 0, err
	}
}
