//go:build linux

package soft

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// Joins and leaves: the multicast socket's memberships, and what the
// receive side keeps of them (the sole group a bare read assumes).

// mcGroup is one joined group.
type mcGroup struct {
	addr     [4]byte
	sendOnly bool
}

func (q *QP) join(grp [4]byte, sendOnly bool) (bool, error) {
	c := &q.rcq
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false, verbs.ErrClosed
	}
	i := c.findGroup(grp)
	if i >= 0 && (sendOnly || !c.groups[i].sendOnly) {
		return c.groups[i].sendOnly, nil
	}
	if !sendOnly && !c.mcBound {
		if err := bindRoCE(q.mcFd, [4]byte{}); err != nil {
			return false, fmt.Errorf("multicast socket: %w", err)
		}
		c.mcBound = true
	}
	if !sendOnly {
		mreq := &unix.IPMreqn{Multiaddr: grp, Address: q.ifaddr, Ifindex: int32(q.ifindex)}
		if err := unix.SetsockoptIPMreqn(q.mcFd, unix.IPPROTO_IP, unix.IP_ADD_MEMBERSHIP, mreq); err != nil {
			err = os.NewSyscallError("setsockopt IP_ADD_MEMBERSHIP", err)
			if errors.Is(err, unix.ENOBUFS) {
				return false, groupLimitError(c.fullMembers(), err)
			}
			return false, err
		}
	}
	if i >= 0 {
		c.groups[i].sendOnly = false
	} else {
		c.groups = append(c.groups, mcGroup{addr: grp, sendOnly: sendOnly})
	}
	if q.selfFilter {
		q.selfGroups.store(c.groups)
	}
	c.membershipChanged()
	return sendOnly, nil
}

// fullMembers counts the groups the QP joined as a full member: the IP
// memberships of its multicast socket; c.mu is held.
func (c *recvCQ) fullMembers() int {
	n := 0
	for _, g := range c.groups {
		if !g.sendOnly {
			n++
		}
	}
	return n
}

// groupLimitError says that a join found the kernel's per-socket limit
// of IP multicast memberships (ENOBUFS from IP_ADD_MEMBERSHIP): a QP's
// full-member groups are its multicast socket's memberships.
func groupLimitError(joined int, err error) error {
	return fmt.Errorf("%w: %w: a software QP joins each group on one socket, and this one has %d groups, "+
		"the limit of net.ipv4.igmp_max_memberships (%d in this network namespace); raise it with "+
		"`sysctl -w net.ipv4.igmp_max_memberships=N` (or /proc/sys/net/ipv4/igmp_max_memberships), "+
		"or spread the groups over more conns (send-only groups do not count)",
		verbs.ErrGroupLimit, err, joined, maxMemberships())
}

func (q *QP) leave(grp [4]byte) error {
	c := &q.rcq
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return verbs.ErrClosed
	}
	i := c.findGroup(grp)
	if i < 0 {
		return fmt.Errorf("not joined: %w", unix.EADDRNOTAVAIL)
	}
	if !c.groups[i].sendOnly {
		if q.selfFilter {
			// Before the membership goes: a datagram sent meanwhile is
			// not counted as filtered (at worst an Overflow too many).
			q.selfGroups.store(append(c.groups[:i:i], c.groups[i+1:]...))
		}
		mreq := &unix.IPMreqn{Multiaddr: grp, Address: q.ifaddr, Ifindex: int32(q.ifindex)}
		if err := unix.SetsockoptIPMreqn(q.mcFd, unix.IPPROTO_IP, unix.IP_DROP_MEMBERSHIP, mreq); err != nil {
			if q.selfFilter {
				q.selfGroups.store(c.groups)
			}
			return os.NewSyscallError("setsockopt IP_DROP_MEMBERSHIP", err)
		}
	}
	c.groups = append(c.groups[:i], c.groups[i+1:]...)
	c.membershipChanged()
	return nil
}

// mcOrigDst turns IP_RECVORIGDSTADDR on the multicast socket of a
// GRHAddressesOnly QP on or off, if it is not already: off while its reads
// are bare, so the kernel prepares no control message for each datagram,
// on when the destination is needed. The kernel makes the message at the
// read, so the change holds for datagrams already queued; c.mu is held.
func (c *recvCQ) mcOrigDst(on bool) {
	if c.origDstOff != on {
		return
	}
	if setBoolOpt(c.q.mcFd, unix.IPPROTO_IP, unix.IP_RECVORIGDSTADDR, on) == nil {
		c.origDstOff = !on
	}
}

// membershipChanged notes a join or leave: bare reads of the multicast
// socket wait until it was read dry, so datagrams queued before the change
// get their destination from IP_ORIGDSTADDR; c.mu is held.
func (c *recvCQ) membershipChanged() {
	c.soleOK, c.mcDry = false, false
	for _, g := range c.groups {
		if g.sendOnly {
			continue
		}
		if c.soleOK {
			c.soleOK = false // two or more
			return
		}
		c.sole, c.soleOK = g.addr, true
	}
}
