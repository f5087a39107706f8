//go:build linux

package soft

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/infiniband"
	"github.com/go-rdma/rdmanet/internal/verbs"
)

// The error state of a software QP, and its reset in place.
//
// A device moves a UD QP to ERR when its port fails under a send or on
// an internal fault (QP_FATAL); the consumer resets it (QP.Reset) and
// carries on with the same QPN. A UDP socket has no such state: a send
// the kernel refuses is that send's alone (WC.Errno), and a link flap
// leaves the sockets, their bindings and their memberships as they were.
// So a software QP enters the error state only when told to, by
// InjectEvent(EventQPError), as a device's QP_FATAL does to a device QP;
// that lets the consumer's recovery run on this backend too. In the
// error state every send is flushed (completes with WCWRFlushErr, Errno
// 0; nothing leaves) and Ready reports false; receiving goes on, as the
// receive side of a socket cannot fail.
//
// Reset does what a reset means for the sockets: the receive queue is
// emptied (the posted buffers are the caller's again, to post anew), each
// socket's pending error is cleared, and every full-member group is
// joined again on the multicast socket (IP_ADD_MEMBERSHIP; EADDRINUSE
// says the membership is still there), so a membership the kernel lost
// is back. The sockets stay the same: the QPN, the address, the bound
// port and the waiter's fds are kept, like a device QP's number and
// attachments. Datagrams already in a socket buffer are received after
// the reset, as a device would receive what is still on the wire.

// qpFault is a QP's error state and the base of its device counters
// (counters.go).
type qpFault struct {
	err  atomic.Bool // the QP is in the error state
	mib0 udpMIB      // the namespace's UDP MIB when the QP was created
}

// enterError puts the QP in the error state (InjectEvent).
func (q *QP) enterError() { q.fault.err.Store(true) }

// Ready reports whether the QP is in RTS: not in the error state, not
// closed, its device not removed.
func (q *QP) Ready() (bool, error) {
	s := &q.sq
	s.mu.Lock()
	err := q.usable("ibv_query_qp", s.closed)
	s.mu.Unlock()
	if err != nil {
		return false, err
	}
	return !q.fault.err.Load(), nil
}

// Reset brings the QP back to RTS in place (see above). It fails with
// verbs.ErrPortDown, doing nothing, while the netdev is not up.
func (q *QP) Reset() error {
	if err := q.portActive(); err != nil {
		return err
	}
	q.sq.mu.Lock()
	q.scq.mu.Lock()
	q.rcq.mu.Lock()
	defer q.sq.mu.Unlock()
	defer q.scq.mu.Unlock()
	defer q.rcq.mu.Unlock()
	if err := q.usable("ibv_modify_qp", q.rcq.closed); err != nil {
		return err
	}
	c := &q.rcq
	for _, fd := range [2]int{q.mcFd, q.uniFd} {
		unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR) // reading it clears it
	}
	for _, g := range c.groups {
		if g.sendOnly {
			continue
		}
		mreq := &unix.IPMreqn{Multiaddr: g.addr, Address: q.ifaddr, Ifindex: int32(q.ifindex)}
		err := unix.SetsockoptIPMreqn(q.mcFd, unix.IPPROTO_IP, unix.IP_ADD_MEMBERSHIP, mreq)
		if err != nil && !errors.Is(err, unix.EADDRINUSE) {
			return fmt.Errorf("soft: ibv_modify_qp QP %#x: rejoin %v: %w", q.qpn, net.IP(g.addr[:]),
				os.NewSyscallError("setsockopt IP_ADD_MEMBERSHIP", err))
		}
	}
	c.flushRQ()
	q.fault.err.Store(false)
	return nil
}

// flushRQ forgets every posted receive, as a reset does; c.mu is held.
func (c *recvCQ) flushRQ() {
	clear(c.rq)
	c.head, c.n = 0, 0
}

// portActive says whether the QP's port is ACTIVE (its netdev up and
// able to carry traffic), as portAttr does; else an error wrapping
// verbs.ErrPortDown.
func (q *QP) portActive() error {
	ifi, err := net.InterfaceByIndex(q.ifindex)
	if err != nil {
		return fmt.Errorf("soft: ibv_modify_qp QP %#x: netdev %d: %v: %w", q.qpn, q.ifindex, err, verbs.ErrPortDown)
	}
	if st := portAttr(ifi).State; st != infiniband.PortActive {
		return fmt.Errorf("soft: ibv_modify_qp QP %#x: %s%s port %d is %v: %w", q.qpn, devicePrefix, ifi.Name, portNum, st, verbs.ErrPortDown)
	}
	return nil
}

// flushSends completes wrs with WCWRFlushErr, sending nothing, as a QP in
// the error state does; s.mu is held. Every WR completes, signaled or
// not, as a device flushes them.
func (q *QP) flushSends(wrs []verbs.SendWR) (int, error) {
	q.scq.mu.Lock()
	defer q.scq.mu.Unlock()
	for i := range wrs {
		q.scq.push(verbs.WC{WRID: wrs[i].WRID, Status: verbs.WCWRFlushErr, Opcode: verbs.WCSend, QPN: q.qpn})
	}
	return len(wrs), nil
}
