//go:build linux

package soft

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/go-rdma/rdmanet/internal/infiniband"
	"github.com/go-rdma/rdmanet/internal/verbs"
)

// ID is a software rdma_cm_id bound to the one port of a software device.
type ID struct {
	mu      sync.Mutex
	r       *resolved
	bind    verbs.Binding
	qp      *QP
	qpn     uint32 // reserved (qpn.go); the QP's once it exists
	ev      eventChannel
	closed  bool
	removed atomic.Bool // a DEVICE_REMOVAL was injected
}

var _ verbs.ID = (*ID)(nil)

func newID(r *resolved) (*ID, error) {
	qpn, err := reserveQPN(r.netns) // one QP per ID
	if err != nil {
		return nil, fmt.Errorf("soft: rdma_create_id: %w", err)
	}
	id := &ID{r: r, qpn: qpn}
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

// Close leaves every group, closes every fd (the QP's sockets and epoll
// sets), closes the event channel and gives the QPN back. It is
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
	id.ev.close()
	id.r.release() // the socket Bind made, unless the QP took it
	releaseQPN(id.r.netns, id.qpn)
	return err
}

// eventChannel is an ID's event channel: a queue that InjectEvent fills
// (the provider raises no events of its own), in Go, so it has no fd;
// push leaves the waiter a note when it is armed.
type eventChannel struct {
	mu     sync.Mutex
	closed bool
	armed  bool
	q      []verbs.Event
	waiter *eventWaiter
}

var _ verbs.EventChannel = (*eventChannel)(nil)

// Fd is -1: the channel's waiter needs none.
func (c *eventChannel) Fd() int { return -1 }

func (c *eventChannel) Next() (verbs.Event, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return verbs.Event{}, false, fmt.Errorf("soft: rdma_get_cm_event: %w", verbs.ErrClosed)
	}
	if len(c.q) == 0 {
		return verbs.Event{}, false, nil
	}
	ev := c.q[0]
	c.q = c.q[1:]
	return ev, true, nil
}

// arm makes the next push leave the waiter a note.
func (c *eventChannel) arm() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("soft: rdma_get_cm_event: %w", verbs.ErrClosed)
	}
	c.armed = true
	return nil
}

func (c *eventChannel) push(ev verbs.Event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return verbs.ErrClosed
	}
	c.q = append(c.q, ev)
	if c.armed && c.waiter != nil {
		c.armed = false
		c.waiter.w.notify()
	}
	return nil
}

// close empties the channel; a WaitPoll still blocked returns
// net.ErrClosed.
func (c *eventChannel) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	c.q = nil
	if c.waiter != nil {
		c.waiter.w.close()
	}
}
