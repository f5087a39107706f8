//go:build linux

package soft

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/roce"
	"github.com/go-rdma/rdmanet/internal/verbs"
)

// The receive CQ and the receive queue it completes: posted WRs, the
// channel, notification.

// wrap is i, an index into a ring of n (0 <= i < 2n), wrapped around: a
// compare where i % n would be a division, tens of cycles, on every
// datagram.
func wrap(i, n int) int {
	if i >= n {
		i -= n
	}
	return i
}

// rqEntry is a posted receive: its WRID and buffer.
type rqEntry struct {
	wrid uint64
	buf  []byte
}

// recvCQ is the receive CQ, and the receive queue it completes.
//
// Its channel fd is an epoll set over both sockets, EPOLLIN,
// level-triggered: readable while a datagram waits. Its waiter (wait.go)
// may also sleep on a narrow fd, the multicast socket alone, which the netpoller
// watches without a nested epoll. A waiter sleeps narrow while no unicast
// datagram came in the last wideWaits waits; then the channel set drops
// the multicast socket (its datagrams wake the netpoller once), and what
// the narrow fd cannot show goes through the kick the waiter registers:
// a unicast datagram (a goroutine watches the unicast socket for it) and
// receives posted while none were (datagrams may be waiting). After a
// unicast datagram the waiter sleeps wide, on the channel set with both
// sockets, and the watch rests. Poll does the receive work, straight into
// the posted buffers: sleeping narrow, it reads the multicast socket
// directly and the unicast socket when the watch saw datagrams there
// (uniPending); sleeping wide, it first asks the channel set itself which
// sockets hold datagrams (one syscall for both; an epoll_wait on it takes
// nothing from the netpoller watching it, as its entries are
// level-triggered). While no receive is posted the socket buffers hold
// the datagrams, as a NIC's buffer would.
type recvCQ struct {
	q      *QP
	mu     sync.Mutex
	closed bool
	evs    [2]unix.EpollEvent // Poll's readiness scratch
	// wideFd is the channel fd: both sockets while the waiter sleeps
	// wide, none while it sleeps narrow (the multicast socket wakes it
	// directly then, and its datagrams must not wake the netpoller
	// twice). uniEpFd is what the unicast watch sleeps on: the unicast
	// socket's EPOLLIN while the waiter sleeps narrow (the netpoller
	// would watch the socket itself for EPOLLOUT too, and it is the QP's
	// sender). narrow (below) says which mode they are set for.
	wideFd, uniEpFd int
	// The waiter's kick, and the watch on the unicast socket that
	// calls it: a dup of the socket in the netpoller, and the goroutine's
	// end.
	kick      atomic.Pointer[func()]
	watch     *os.File
	watchDone chan struct{}
	// mode: where the waiter sleeps, narrow or wide (sleepmode.go), and
	// what the sets are arranged for (setMode changes them).
	mode sleepMode
	// uniPending: the unicast socket may hold datagrams that Poll,
	// reading narrow, must look for (the watch saw some, or the mode
	// just became narrow).
	uniPending atomic.Bool
	waiter     *recvWaiter // it holds wideFd and the multicast socket once made
	last       int         // the socket the last datagram came from
	pace       pace        // how much a read after a wake asks for

	// The receive queue: a deque of posted WRs, FIFO; a buffer a dropped
	// datagram landed in goes back to the front.
	rq   []rqEntry
	head int
	n    int

	// recvmmsg scratch, one slot per datagram of a batch; it grows to
	// maxScratch slots when a read fills it (full).
	maxScratch int
	full       bool
	msgs       []mmsghdr
	iov        [][5]unix.Iovec // header, buffer, tail[, overflow]; or the buffer in place[, overflow] (gro.go)
	hdr        [][roce.HdrSize]byte
	tail       [][tailSize]byte
	names      []unix.RawSockaddrInet4
	ctrl       [][ctrlSize]byte
	kept       []rqEntry

	turn   int
	groups []mcGroup
	// Bare reads: a QP created with GRHAddressesOnly reads without
	// control messages (recvfrom for one datagram in place), where the
	// destination address is known without IP_ORIGDSTADDR. The unicast
	// socket is bound to the QP's address; the multicast socket's is
	// known while exactly one group is joined for receiving (sole) and
	// the socket was read dry since the last join or leave (mcDry), so
	// no datagram from before the change is still queued. The one thing
	// a bare read cannot tell apart is a unicast datagram that strays
	// onto the multicast socket (bound to 0.0.0.0:4791, it also gets
	// datagrams for local addresses no QP holds): its ICRC is then
	// checked as if it were sent to the group, and it is dropped as a
	// bad ICRC rather than as not for us.
	sole       [4]byte
	soleOK     bool
	mcDry      bool
	bare       bool    // the read in progress is bare
	bareDst    [4]byte // and its datagrams' destination address
	nBare      uint64  // bare reads made (tests)
	mcBound    bool    // the multicast socket is bound (at the first join to receive)
	origDstOff bool    // the multicast socket's IP_RECVORIGDSTADDR is off (mcOrigDst)
	meta       rxMeta
	hd         roce.Header
	icrc       roce.FlowICRC
	gro        groState // receive-side GRO (gro.go)
}

var _ verbs.CQ = (*recvCQ)(nil)

// newEpoll makes a non-blocking epoll set with each fd in it for events.
func newEpoll(fds []int, events []uint32) (int, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return noFd, os.NewSyscallError("epoll_create1", err)
	}
	// A new epoll fd's status flags are O_RDWR alone (F_SETFL keeps the
	// access mode): set O_NONBLOCK without reading them first.
	if _, err := unix.FcntlInt(uintptr(epfd), unix.F_SETFL, unix.O_NONBLOCK); err != nil {
		unix.Close(epfd)
		return noFd, os.NewSyscallError("fcntl", err)
	}
	for i, fd := range fds {
		ev := unix.EpollEvent{Events: events[i], Fd: int32(fd)}
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			unix.Close(epfd)
			return noFd, os.NewSyscallError("epoll_ctl", err)
		}
	}
	return epfd, nil
}

func (c *recvCQ) init(q *QP, depth int) error {
	c.q = q
	both := []int{q.mcFd, q.uniFd}
	var err error
	// The channel fd, also Poll's readiness check while wide; it starts
	// wide, as a consumer that never asks Narrow needs. The unicast
	// watch's set starts empty.
	if c.wideFd, err = newEpoll(both, []uint32{unix.EPOLLIN, unix.EPOLLIN}); err != nil {
		return err
	}
	if c.uniEpFd, err = newEpoll(nil, nil); err != nil {
		return err
	}
	c.rq = make([]rqEntry, depth)
	c.maxScratch = min(depth, recvBatch)
	c.growScratch(min(c.maxScratch, firstScratch))
	return nil
}

func (c *recvCQ) findGroup(a [4]byte) int {
	for i := range c.groups {
		if c.groups[i].addr == a {
			return i
		}
	}
	return -1
}

// ReqNotify does nothing: the channel fd is level-triggered.
func (c *recvCQ) ReqNotify() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("soft: ibv_req_notify_cq: %w", verbs.ErrClosed)
	}
	return nil
}

// Channel is the receive CQ's channel: the epoll set, and the multicast
// socket as its narrow fd.
func (c *recvCQ) Channel() verbs.Channel { return (*recvChannel)(c) }

type recvChannel recvCQ

func (ch *recvChannel) Fd() int { return ch.wideFd }

// GetEvents returns 0, nil: readiness is the sockets' own, nothing to
// drain.
func (ch *recvChannel) GetEvents() (int, error) { return 0, nil }

// AckEvents does nothing.
func (ch *recvChannel) AckEvents(int) {}

// PostRecv posts receive WRs. Each buffer must hold the 40-byte GRH area
// and the payload (and should hold 40 + MTU).
func (q *QP) PostRecv(wrs []verbs.RecvWR) (int, error) {
	c := &q.rcq
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := q.usable("ibv_post_recv", c.closed); err != nil {
		return 0, err
	}
	if c.n == 0 && len(wrs) > 0 {
		// Datagrams may wait with no edge left to wake a reader: kick it
		// (deferred: after the receives are in). Runs sent with UDP GSO
		// may now arrive whole (gro.go).
		defer c.kickWaiter()
		c.groReceivesPosted()
	}
	for i := range wrs {
		if c.n == len(c.rq) {
			return i, fmt.Errorf("soft: ibv_post_recv: %w", verbs.ErrQueueFull)
		}
		b, err := q.sgeBytes(wrs[i].SGE)
		if err != nil {
			return i, fmt.Errorf("soft: ibv_post_recv: %w", err)
		}
		if len(b) < verbs.GRHSize {
			return i, fmt.Errorf("soft: ibv_post_recv: buffer of %d bytes is shorter than the %d-byte GRH", len(b), verbs.GRHSize)
		}
		c.rq[wrap(c.head+c.n, len(c.rq))] = rqEntry{wrid: wrs[i].WRID, buf: b}
		c.n++
	}
	return len(wrs), nil
}
