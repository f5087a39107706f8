package rdmanet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-rdma/rdmanet/internal/netaddr"
	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/ipoib"
)

// joinTimeout bounds a join made by JoinGroup (rdma_cm waits for the
// subnet manager on InfiniBand).
const joinTimeout = 10 * time.Second

type membership struct {
	group verbs.Group
	ip    netip.Addr // zero for a raw-MGID join
	m     verbs.Membership
	ah    verbs.AH
}

type groupState struct {
	mu     sync.RWMutex
	byIP   map[netip.Addr]*membership
	byMGID map[ipoib.GID]*membership
}

func (g *groupState) lookupIP(ip netip.Addr) *membership {
	g.mu.RLock()
	m := g.byIP[ip]
	g.mu.RUnlock()
	return m
}

func (g *groupState) lookupMGID(mgid ipoib.GID) *membership {
	g.mu.RLock()
	m := g.byMGID[mgid]
	g.mu.RUnlock()
	return m
}

// join joins g and records the membership.
func (c *Conn) join(ctx context.Context, g verbs.Group) error {
	c.grp.mu.Lock()
	defer c.grp.mu.Unlock()
	if c.closed.Load() { // Close ran since JoinGroup looked
		return net.ErrClosed
	}
	if c.grp.byIP == nil {
		c.grp.byIP = map[netip.Addr]*membership{}
		c.grp.byMGID = map[ipoib.GID]*membership{}
	}
	var ip netip.Addr
	if g.IP != nil {
		ip, _ = netip.AddrFromSlice(g.IP)
		ip = ip.Unmap()
		if _, dup := c.grp.byIP[ip]; dup {
			return fmt.Errorf("group %s already joined", ip)
		}
		// Joined before by its MGID? On RoCE (and the software backend)
		// an IP group's MGID is known ahead; on InfiniBand it depends on
		// the P_Key, and the check after the join catches it.
		if c.local.LinkLayer == ipoib.LinkLayerEthernet {
			if mgid, err := ipoib.RoCEv2MGID(ip); err == nil {
				if _, dup := c.grp.byMGID[mgid]; dup {
					return fmt.Errorf("group %s already joined as MGID %s", ip, mgid)
				}
			}
		}
	} else if _, dup := c.grp.byMGID[g.MGID]; dup {
		return fmt.Errorf("MGID %s already joined", g.MGID)
	}
	m, err := c.id.Join(ctx, g, verbs.JoinOptions{SendOnly: c.cfg.SendOnly})
	c.kickEvents()
	if err != nil {
		return err
	}
	if _, dup := c.grp.byMGID[m.MGID]; dup {
		// The same group under another name. The provider's membership is
		// the one already recorded; leaving here would end it.
		return fmt.Errorf("group %s already joined as MGID %s", groupName(g), m.MGID)
	}
	ah, err := c.qp.CreateAH(m.AH)
	if err != nil {
		c.id.Leave(m.MGID)
		return err
	}
	ms := &membership{group: g, ip: ip, m: m, ah: ah}
	if ip.IsValid() {
		c.grp.byIP[ip] = ms
	}
	c.grp.byMGID[m.MGID] = ms
	if m.MTU > 0 {
		c.mtu.Store(int32(min(m.MTU, c.MTU())))
	}
	return nil
}

func groupName(g verbs.Group) string {
	if g.IP != nil {
		return g.IP.String()
	}
	return g.MGID.String()
}

// Address arguments: JoinGroup, LeaveGroup, GroupAddr and WriteTo take
// the same types, with the same rules. A group is a multicast
// *net.UDPAddr (its port is ignored) or *net.IPAddr, as
// golang.org/x/net/ipv4's JoinGroup takes, or an *Addr naming its MGID;
// WriteTo also takes a peer's unicast *Addr. nil, and a nil pointer of
// any of these types, is a missing address on every call, as
// net.UDPConn.WriteTo treats a nil *net.UDPAddr.

// errMissingAddr is what every call says of a nil address.
var errMissingAddr = &addrError{addr: nil, why: "want a multicast *net.UDPAddr or *net.IPAddr, or an *rdmanet.Addr"}

// groupIP returns the IP of a *net.UDPAddr or *net.IPAddr argument; ok
// is false for any other type, and for nil pointers.
func groupIP(addr net.Addr) (ip net.IP, ok bool) {
	switch a := addr.(type) {
	case *net.UDPAddr:
		if a != nil {
			return a.IP, true
		}
	case *net.IPAddr:
		if a != nil {
			return a.IP, true
		}
	}
	return nil, false
}

// groupOf turns JoinGroup's argument into a verbs.Group.
func groupOf(group net.Addr) (verbs.Group, error) {
	if netaddr.IsNil[*Addr](group) {
		return verbs.Group{}, errMissingAddr
	}
	if ip, ok := groupIP(group); ok {
		if ip.IsMulticast() {
			return verbs.Group{IP: ip}, nil
		}
		return verbs.Group{}, &addrError{addr: group, why: "not a multicast group"}
	}
	if a, ok := group.(*Addr); ok {
		if a.IsMulticast() {
			return verbs.Group{MGID: a.GID}, nil
		}
		return verbs.Group{}, &addrError{addr: group, why: "not a multicast group"}
	}
	return verbs.Group{}, &addrError{addr: group, why: "want a multicast *net.UDPAddr or *net.IPAddr, or a group's *rdmanet.Addr"}
}

func (c *Conn) checkInterface(ifi *net.Interface) error {
	if ifi != nil && ifi.Name != c.local.Netdev {
		return fmt.Errorf("interface %s: the conn is bound to %s", ifi.Name, c.local.Netdev)
	}
	return nil
}

// JoinGroup joins the multicast group on the conn's port, as
// golang.org/x/net/ipv4's PacketConn.JoinGroup does: group is a
// *net.UDPAddr or *net.IPAddr, or an *Addr naming a raw MGID (the types
// WriteTo takes for a group). ifi must be nil or the conn's interface. One conn can be in many groups, up to the
// backend's limit, past which JoinGroup fails with ErrGroupLimit naming
// it: on the software backend net.ipv4.igmp_max_memberships full-member
// groups per conn (default 20; send-only groups do not count); on
// rdma-core the device's max_mcast_grp groups and max_mcast_qp_attach QPs
// per group (see `rdmanet devices`).
func (c *Conn) JoinGroup(ifi *net.Interface, group net.Addr) error {
	if err := c.checkOpen(); err != nil {
		return c.opError("join", group, err)
	}
	g, err := groupOf(group)
	if err == nil {
		err = c.checkInterface(ifi)
	}
	if err == nil {
		ctx, cancel := context.WithTimeout(c.ctx, joinTimeout)
		err = c.join(ctx, g)
		cancel()
	}
	return c.opError("join", group, err)
}

// LeaveGroup leaves a group joined with JoinGroup or ListenMulticast.
func (c *Conn) LeaveGroup(ifi *net.Interface, group net.Addr) error {
	if err := c.checkOpen(); err != nil {
		return c.opError("leave", group, err)
	}
	g, err := groupOf(group)
	if err == nil {
		err = c.checkInterface(ifi)
	}
	if err == nil {
		err = c.leave(g)
	}
	return c.opError("leave", group, err)
}

func (c *Conn) leave(g verbs.Group) error {
	c.wr.mu.Lock()
	defer c.wr.mu.Unlock()
	c.grp.mu.Lock()
	defer c.grp.mu.Unlock()
	if c.closed.Load() {
		return net.ErrClosed
	}
	var m *membership
	if g.IP != nil {
		ip, _ := netip.AddrFromSlice(g.IP)
		m = c.grp.byIP[ip.Unmap()]
	} else {
		m = c.grp.byMGID[g.MGID]
	}
	if m == nil {
		return errors.New("group not joined")
	}
	delete(c.grp.byMGID, m.m.MGID)
	if m.ip.IsValid() {
		delete(c.grp.byIP, m.ip)
	}
	c.wr.lastGroup = nil // the send side's cached lookup
	m.ah.Close()
	return c.id.Leave(m.m.MGID)
}

// GroupAddr returns the Addr of a joined group (its MGID and the multicast
// QPN), for WriteBatch. group is as for JoinGroup. (AddrFromMGID makes
// the Addr of an MGID without a conn or a join.)
func (c *Conn) GroupAddr(group net.Addr) (Addr, error) {
	if err := c.checkOpen(); err != nil {
		return Addr{}, c.opError("lookup", group, err)
	}
	g, err := groupOf(group)
	if err != nil {
		return Addr{}, c.opError("lookup", group, err)
	}
	var m *membership
	if g.IP != nil {
		ip, _ := netip.AddrFromSlice(g.IP)
		m = c.grp.lookupIP(ip.Unmap())
	} else {
		m = c.grp.lookupMGID(g.MGID)
	}
	if m == nil {
		return Addr{}, c.opError("lookup", group, ErrNotJoined)
	}
	return Addr{GID: m.m.MGID, QPN: m.m.RemoteQPN}, nil
}

// Groups returns the MGIDs of the groups the conn is in: none once it is
// closed.
func (c *Conn) Groups() []Addr {
	c.grp.mu.RLock()
	defer c.grp.mu.RUnlock()
	out := make([]Addr, 0, len(c.grp.byMGID))
	for g, m := range c.grp.byMGID {
		out = append(out, Addr{GID: g, QPN: m.m.RemoteQPN})
	}
	return out
}

// rejoinAfter is time.After for rejoin's back-off; a test sees the
// back-offs through it.
var rejoinAfter = time.After

// rejoin leaves and joins a group again after a MULTICAST_ERROR, with
// exponential backoff, until it succeeds, the group is left, or the conn
// closes.
func (c *Conn) rejoin(mgid ipoib.GID) {
	backoff := 10 * time.Millisecond
	for c.ctx.Err() == nil && c.fatalErr.Load() == nil {
		m := c.grp.lookupMGID(mgid)
		if m == nil {
			return
		}
		if c.tryRejoin(m) {
			atomic.AddUint64(&c.ctr.rejoins, 1)
			return
		}
		select {
		case <-c.ctx.Done():
			return
		case <-rejoinAfter(backoff):
		}
		if backoff < time.Second {
			backoff *= 2
		}
	}
}

func (c *Conn) tryRejoin(m *membership) bool {
	c.wr.mu.Lock()
	defer c.wr.mu.Unlock()
	c.grp.mu.Lock()
	defer c.grp.mu.Unlock()
	if c.grp.byMGID[m.m.MGID] != m || c.closed.Load() {
		return true // left or closed meanwhile: nothing to do
	}
	c.id.Leave(m.m.MGID)
	ctx, cancel := context.WithTimeout(c.ctx, joinTimeout)
	nm, err := c.id.Join(ctx, m.group, verbs.JoinOptions{SendOnly: c.cfg.SendOnly})
	cancel()
	c.kickEvents()
	if err != nil {
		return false
	}
	ah, err := c.qp.CreateAH(nm.AH)
	if err != nil {
		c.id.Leave(nm.MGID)
		return false
	}
	m.ah.Close()
	m.ah, m.m = ah, nm
	return true
}
