//go:build linux

package soft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// RefuseGSO makes every send of a run of two or more datagrams fail with
// errno, as a kernel or route that cannot do UDP GSO would, until restore
// is called; refused counts the refusals.
func RefuseGSO(errno unix.Errno) (refused *atomic.Int32, restore func()) {
	refused = new(atomic.Int32)
	sendRuns = func(fd int, msgs []mmsghdr, flags int) (int, error) {
		if msgs[0].Hdr.Iovlen > 3 {
			refused.Add(1)
			return 0, errno
		}
		return sendmmsg(fd, msgs, flags)
	}
	return refused, func() { sendRuns = sendmmsg }
}

// CountSendRuns records how many messages each sendmmsg of a post's
// runs carries (sendRuns), until restore is called. A lone datagram last
// in what is left to send goes by sendto (sendFlat) instead, and is not
// recorded.
func CountSendRuns() (calls func() []int, restore func()) {
	var mu sync.Mutex
	var lens []int
	sendRuns = func(fd int, msgs []mmsghdr, flags int) (int, error) {
		mu.Lock()
		lens = append(lens, len(msgs))
		mu.Unlock()
		return sendmmsg(fd, msgs, flags)
	}
	calls = func() []int {
		mu.Lock()
		defer mu.Unlock()
		return append([]int(nil), lens...)
	}
	return calls, func() { sendRuns = sendmmsg }
}

// RefuseGSOSendShort is RefuseGSO whose sendmmsg of two or more lone
// datagrams sends all but the last, as the kernel's may (it returns how
// many it sent when a later one would fail), until restore is called.
func RefuseGSOSendShort(errno unix.Errno) (restore func()) {
	sendRuns = func(fd int, msgs []mmsghdr, flags int) (int, error) {
		if msgs[0].Hdr.Iovlen > 3 {
			return 0, errno
		}
		if len(msgs) > 1 {
			msgs = msgs[:len(msgs)-1]
		}
		return sendmmsg(fd, msgs, flags)
	}
	return func() { sendRuns = sendmmsg }
}

// RefuseUDPSegment makes sendmmsg fail with errno at the first message
// that carries a control message (UDP_SEGMENT, the only one sends carry),
// sending those before it, as the kernel does for a route that cannot
// take UDP GSO at all, a run of one segment included (udp_send_skb's EIO
// on an IPsec route), until restore is called.
func RefuseUDPSegment(errno unix.Errno) (restore func()) {
	sendRuns = func(fd int, msgs []mmsghdr, flags int) (int, error) {
		for i := range msgs {
			if msgs[i].Hdr.Controllen > 0 {
				if i == 0 {
					return 0, errno
				}
				msgs = msgs[:i]
				break
			}
		}
		return sendmmsg(fd, msgs, flags)
	}
	return func() { sendRuns = sendmmsg }
}

// BareReads is how many bare reads (no control messages) q's receive CQ
// made.
func BareReads(q *QP) uint64 {
	q.rcq.mu.Lock()
	defer q.rcq.mu.Unlock()
	return q.rcq.nBare
}

// RecvScratch is how many datagrams q's receive scratch holds: the most
// one read takes.
func RecvScratch(q *QP) int {
	q.rcq.mu.Lock()
	defer q.rcq.mu.Unlock()
	return len(q.rcq.msgs)
}

// RecvScratchAt is the address of q's receive scratch's first slot: it
// changes only when the scratch is made again.
func RecvScratchAt(q *QP) uintptr {
	q.rcq.mu.Lock()
	defer q.rcq.mu.Unlock()
	return uintptr(unsafe.Pointer(&q.rcq.msgs[0]))
}

// SendScratch is how many WRs q's send scratch holds and the address of
// its first slot, which changes only when the scratch is made again.
func SendScratch(q *QP) (int, uintptr) {
	q.sq.mu.Lock()
	defer q.sq.mu.Unlock()
	return len(q.sq.msgs), uintptr(unsafe.Pointer(&q.sq.msgs[0]))
}

// BindError is what a bind to addr:4791 that failed with err returns.
func BindError(addr [4]byte, err error) error { return bindError(addr, err) }

// Transparent reports whether q's unicast socket has IP_TRANSPARENT.
func Transparent(q *QP) bool {
	v, err := unix.GetsockoptInt(q.uniFd, unix.IPPROTO_IP, unix.IP_TRANSPARENT)
	return err == nil && v == 1
}

// FakePortHolder makes bind errors name the given holder of port 4791
// (pid 0 and rxe false: none found) until restore is called.
func FakePortHolder(pid int, comm string, rxe bool) (restore func()) {
	portHolder = func() holder { return holder{pid: pid, comm: comm, rxe: rxe} }
	return func() { portHolder = findPortHolder }
}

// RecvWaiterHooks are what the receive CQ's waiter uses to sleep narrow
// (wait.go): the narrow fd, whether to sleep on it, and the kick.
type RecvWaiterHooks interface {
	NarrowFd() int
	Narrow() bool
	SetKick(kick func()) error
}

// RecvWaiterHooksOf returns q's receive CQ's waiter hooks.
func RecvWaiterHooksOf(q *QP) RecvWaiterHooks { return recvHooks{&q.rcq} }

type recvHooks struct{ c *recvCQ }

func (h recvHooks) NarrowFd() int             { return h.c.q.mcFd }
func (h recvHooks) Narrow() bool              { return h.c.sleepNarrow() }
func (h recvHooks) SetKick(kick func()) error { return h.c.setKick(kick) }

// UnicastFd is q's unicast socket.
func UnicastFd(q *QP) int { return q.uniFd }

// MulticastFd is q's multicast socket.
func MulticastFd(q *QP) int { return q.mcFd }

// NetnsCookie is the cookie of the network namespace of socket fd, 0
// where it cannot be told (netview.go).
func NetnsCookie(fd int) uint64 { return netnsCookie(fd) }

// Pace is the pace q's receive CQ reads at after a wake (poll.go):
// "stream", "single" or "probe".
func Pace(q *QP) string {
	q.rcq.mu.Lock()
	defer q.rcq.mu.Unlock()
	return [...]string{paceStream: "stream", paceSingle: "single", paceProbe: "probe"}[q.rcq.pace]
}

// PollRecvWoken polls q's receive CQ as its waiter does after its fd
// woke the wait.
func PollRecvWoken(q *QP, wcs []verbs.WC) (int, error) { return q.rcq.poll(wcs, true) }

// SelfFiltered reports whether q's multicast socket has the self filter.
func SelfFiltered(q *QP) bool { return q.selfFilter }

// NoSelfFilter makes new QPs go without the self filter, as where the
// kernel refuses it, until restore is called.
func NoSelfFilter() (restore func()) {
	old := attachSelfFilter
	attachSelfFilter = func(int, [4]byte, uint32) bool { return false }
	return func() { attachSelfFilter = old }
}

// InjectCoalesced puts data before q's receive CQ as one read of socket
// sock (0 multicast, 1 unicast) coalesced with segment size seg, as the
// kernel returns a run with UDP_GRO, sent from src:sport to dst: the next
// Poll completes its datagrams (gro.go). It fails while datagrams of an
// earlier read are pending.
func InjectCoalesced(q *QP, sock int, data []byte, seg int, src [4]byte, sport uint16, dst [4]byte) error {
	return injectCoalesced(q, sock, data, seg, src, sport, dst, 0)
}

// InjectCoalescedTruncated is InjectCoalesced of a read the kernel cut
// (MSG_TRUNC): a run longer than a GRO row.
func InjectCoalescedTruncated(q *QP, sock int, data []byte, seg int, src [4]byte, sport uint16, dst [4]byte) error {
	return injectCoalesced(q, sock, data, seg, src, sport, dst, unix.MSG_TRUNC)
}

func injectCoalesced(q *QP, sock int, data []byte, seg int, src [4]byte, sport uint16, dst [4]byte, flags int32) error {
	c := &q.rcq
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gro.pending() {
		return errors.New("datagrams of an earlier read are pending")
	}
	if len(data) > groRoom {
		return fmt.Errorf("%d bytes: a coalesced read is at most %d", len(data), groRoom)
	}
	if err := c.gro.hold(); err != nil {
		return err
	}
	row := c.gro.area.row(0)
	c.gro.area.data[0] = row[groPrefix : groPrefix+copy(row[groPrefix:], data)]
	m := &c.msgs[0]
	m.Len, m.Hdr.Flags = uint32(len(data)), flags
	ctrl := c.ctrl[0][:]
	h := (*unix.Cmsghdr)(unsafe.Pointer(&ctrl[0]))
	h.Level, h.Type = unix.SOL_UDP, unix.UDP_GRO
	h.SetLen(unix.CmsgLen(4))
	binary.NativeEndian.PutUint32(ctrl[unix.CmsgLen(0):], uint32(seg))
	m.Hdr.SetControllen(unix.CmsgSpace(4))
	c.names[0] = unix.RawSockaddrInet4{Family: unix.AF_INET, Port: htons(sport), Addr: src}
	c.bare, c.bareDst = true, dst
	c.startCopied(sock, 0, 1)
	return nil
}

// LeaveRowIovec points the overflow iovec of slot 0 of q's receive
// scratch at row, as a GRO read in place leaves it (recvmsg.go) after the
// area went back to the pool.
func LeaveRowIovec(q *QP, row []byte) {
	q.rcq.mu.Lock()
	defer q.rcq.mu.Unlock()
	setIov(&q.rcq.iov[0][4], row)
}

// DropMemberships drops the IP memberships of q's multicast socket
// behind q's back, as the kernel does when a netdev goes away; q still
// lists its groups.
func DropMemberships(q *QP) error {
	q.rcq.mu.Lock()
	defer q.rcq.mu.Unlock()
	for _, g := range q.rcq.groups {
		if g.sendOnly {
			continue
		}
		mreq := &unix.IPMreqn{Multiaddr: g.addr, Address: q.ifaddr, Ifindex: int32(q.ifindex)}
		if err := unix.SetsockoptIPMreqn(q.mcFd, unix.IPPROTO_IP, unix.IP_DROP_MEMBERSHIP, mreq); err != nil {
			return err
		}
	}
	return nil
}

// GROReads is how many coalesced reads q's receive CQ took, and how many
// datagrams they held.
func GROReads(q *QP) (reads, datagrams uint64) {
	q.rcq.mu.Lock()
	defer q.rcq.mu.Unlock()
	return q.rcq.gro.coalesced, q.rcq.gro.segs
}

// GROAreaHeld reports whether q's receive CQ holds a GRO area now.
func GROAreaHeld(q *QP) bool {
	q.rcq.mu.Lock()
	defer q.rcq.mu.Unlock()
	return q.rcq.gro.area != nil
}

// GROActive reports whether UDP_GRO is on q's multicast and unicast
// sockets now.
func GROActive(q *QP) [2]bool {
	q.rcq.mu.Lock()
	defer q.rcq.mu.Unlock()
	return q.rcq.gro.active
}

// FlushRecvs forgets q's posted receives, as a reset does.
func FlushRecvs(q *QP) {
	q.rcq.mu.Lock()
	defer q.rcq.mu.Unlock()
	q.rcq.flushRQ()
}

// AttachSelfFilter attaches the self filter of a QP at src with QPN qpn to
// fd, reporting whether it did.
func AttachSelfFilter(fd int, src [4]byte, qpn uint32) bool { return attachSelfFilter(fd, src, qpn) }

// SelfFilterMinLen is the shortest UDP datagram (header included) whose
// source QP the self filter reads.
const SelfFilterMinLen = selfFilterMinLen

// NoGROArea sets the GRO pool's free areas aside and limits the process's
// address space (RLIMIT_AS) to a megabyte past what it maps now, where an
// area takes 4 MiB: the next read of a socket with GRO cannot map one.
// restore raises the limit and gives the areas back. The limit is the
// whole process's: for a child process (testenv.InChild).
func NoGROArea() (restore func(), err error) {
	statm, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return nil, err
	}
	f := strings.Fields(string(statm))
	if len(f) == 0 {
		return nil, fmt.Errorf("/proc/self/statm: %q", statm)
	}
	pages, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		return nil, err
	}
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_AS, &old); err != nil {
		return nil, err
	}
	groPool.mu.Lock()
	nfree := groPool.nfree
	groPool.nfree = 0
	groPool.mu.Unlock()
	lim := old
	lim.Cur = pages*uint64(unix.Getpagesize()) + 1<<20
	if err := unix.Setrlimit(unix.RLIMIT_AS, &lim); err != nil {
		groPool.mu.Lock()
		groPool.nfree = nfree
		groPool.mu.Unlock()
		return nil, err
	}
	return func() {
		unix.Setrlimit(unix.RLIMIT_AS, &old)
		groPool.mu.Lock()
		groPool.nfree += nfree
		groPool.mu.Unlock()
	}, nil
}

// CountRecvfrom counts recv's reads of fd by recvfrom (recvBare) until
// restore is called.
func CountRecvfrom(fd int) (reads func() int, restore func()) {
	var n atomic.Int32
	recvBare = func(f int, m *mmsghdr, flags int) (int, error) {
		if f == fd {
			n.Add(1)
		}
		return recvfromOne(f, m, flags)
	}
	return func() int { return int(n.Load()) }, func() { recvBare = recvfromOne }
}

// PreparedInFlat prepares wrs on q as PostSend does, sending nothing,
// and reports for each WR prepared whether its payload iovec points into
// q's flat buffer (where seal copies a lone datagram's payload for
// sendFlat).
func PreparedInFlat(q *QP, wrs []verbs.SendWR) ([]bool, error) {
	s := &q.sq
	s.mu.Lock()
	defer s.mu.Unlock()
	k, err := q.prepare(wrs)
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(s.flat)))
	in := make([]bool, k)
	for i := range k {
		b := uintptr(unsafe.Pointer(s.iov[i][1].Base))
		in[i] = b >= lo && b < lo+uintptr(len(s.flat))
		s.iov[i][1] = unix.Iovec{} // as transmit leaves it
	}
	return in, err
}

// CountWatchChecks counts the checks of the unicast socket the receive
// CQs' watches make (watchUnicast), until restore is called.
func CountWatchChecks() (checks func() int, restore func()) {
	var n atomic.Int32
	h := func() { n.Add(1) }
	watchChecked.Store(&h)
	return func() int { return int(n.Load()) }, func() { watchChecked.Store(nil) }
}

// CountRecvmsg counts recv's reads of fd by a one-slot recvmsg (recvOne)
// until restore is called.
func CountRecvmsg(fd int) (reads func() int, restore func()) {
	var n atomic.Int32
	recvOne = func(f int, m *mmsghdr, flags int) (int, error) {
		if f == fd {
			n.Add(1)
		}
		return recvmsgOne(f, m, flags)
	}
	return func() int { return int(n.Load()) }, func() { recvOne = recvmsgOne }
}

// GROOn reports which of q's sockets' reads take GRO overflow rows
// (multicast, unicast): on from GRO's going on until a read finds the
// socket dry after it went off.
func GROOn(q *QP) [2]bool {
	q.rcq.mu.Lock()
	defer q.rcq.mu.Unlock()
	return q.rcq.gro.on
}
