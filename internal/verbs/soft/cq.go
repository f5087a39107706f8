//go:build linux

package soft

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/roce"
	"github.com/go-rdma/rdmanet/internal/verbs"
)

// sendCQ is the send CQ: a ring of completions. PostSend completes every
// WR before it returns, so the CQ has no channel fd: a completion queued
// while the CQ is armed leaves its waiter a note (wait.go).
type sendCQ struct {
	mu     sync.Mutex
	closed bool
	ring   []verbs.WC
	depth  int // completions the CQ holds (the ring grows to it)
	head   int
	n      int
	armed  bool
	waiter *sendWaiter
	// queued mirrors n, or is -1 once closed, set with c.mu held: every
	// write polls the CQ first (rdmanet's takePending), and selective
	// signaling leaves it empty almost always, which Poll sees without
	// the lock.
	queued atomic.Int32
}

var _ verbs.CQ = (*sendCQ)(nil)

func (c *sendCQ) init(depth int) {
	c.depth = depth
	c.ring = make([]verbs.WC, min(depth, sendCQRing))
}

// sendCQRing is the send CQ's first ring: selective signaling keeps few
// completions queued, and the ring grows when more come.
const sendCQRing = 16

// room is how many completions fit; PostSend holds the send queue lock,
// and only PostSend adds completions, so room only grows meanwhile.
func (c *sendCQ) room() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.depth - c.n
}

// push queues a completion; c.mu is held. A completion that finds the ring
// full grows it (up to the CQ's depth for signaled ones, which PostSend
// keeps room for; past it only for an unsignaled WR's error completion):
// a completion is never dropped.
func (c *sendCQ) push(wc verbs.WC) {
	if c.n == len(c.ring) {
		ring := make([]verbs.WC, 2*len(c.ring))
		for i := range c.n {
			ring[i] = c.ring[(c.head+i)%len(c.ring)]
		}
		c.ring, c.head = ring, 0
	}
	c.ring[wrap(c.head+c.n, len(c.ring))] = wc
	c.n++
	c.queued.Store(int32(c.n))
	if c.armed {
		c.armed = false
		if c.waiter != nil {
			c.waiter.w.notify()
		}
	}
}

// Poll takes queued send completions. An empty CQ that is not closed
// answers 0 without taking the lock.
func (c *sendCQ) Poll(wcs []verbs.WC) (int, error) {
	if c.queued.Load() == 0 {
		return 0, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, fmt.Errorf("soft: ibv_poll_cq: %w", verbs.ErrClosed)
	}
	k := min(len(wcs), c.n)
	for i := range k {
		wcs[i] = c.ring[c.head]
		c.head = wrap(c.head+1, len(c.ring))
	}
	if k > 0 {
		c.n -= k
		c.queued.Store(int32(c.n))
	}
	return k, nil
}

// ReqNotify arms the CQ: the next completion queued leaves the waiter a
// note.
func (c *sendCQ) ReqNotify() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("soft: ibv_req_notify_cq: %w", verbs.ErrClosed)
	}
	c.armed = true
	return nil
}

// Channel is the send CQ's completion channel, which has no fd (Fd is
// -1): the waiter learns of completions from the CQ itself.
func (c *sendCQ) Channel() verbs.Channel { return sendChannel{} }

type sendChannel struct{}

func (sendChannel) Fd() int                 { return -1 }
func (sendChannel) GetEvents() (int, error) { return 0, nil }
func (sendChannel) AckEvents(int)           {}

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

const (
	ctrlSize = 128 // IP_ORIGDSTADDR, IP_TTL, IP_TOS, SO_RXQ_OVFL, UDP_GRO: 32+24+24+24+24
	tailSize = 16  // room past the buffer: ImmDt, pad, ICRC
)

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
		return -1, os.NewSyscallError("epoll_create1", err)
	}
	// A new epoll fd's status flags are O_RDWR alone (F_SETFL keeps the
	// access mode): set O_NONBLOCK without reading them first.
	if _, err := unix.FcntlInt(uintptr(epfd), unix.F_SETFL, unix.O_NONBLOCK); err != nil {
		unix.Close(epfd)
		return -1, os.NewSyscallError("fcntl", err)
	}
	for i, fd := range fds {
		ev := unix.EpollEvent{Events: events[i], Fd: int32(fd)}
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			unix.Close(epfd)
			return -1, os.NewSyscallError("epoll_ctl", err)
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

// firstScratch is how many datagrams the receive scratch first holds; a
// read that fills it doubles it, up to recvBatch (or the queue depth),
// so a conn that sees a stream pays for batches and one that does not
// keeps a few hundred bytes a slot.
const firstScratch = 8

// growScratch makes the recvmmsg scratch n slots; no read is in progress.
func (c *recvCQ) growScratch(n int) {
	c.msgs = make([]mmsghdr, n)
	c.iov = make([][5]unix.Iovec, n)
	c.hdr = make([][roce.HdrSize]byte, n)
	c.tail = make([][tailSize]byte, n)
	c.names = make([]unix.RawSockaddrInet4, n)
	c.ctrl = make([][ctrlSize]byte, n)
	c.kept = make([]rqEntry, n)
	c.initScratch()
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

// sleepNarrow says whether the waiter sleeps on the multicast socket: yes
// unless a unicast datagram came within the last wideWaits waits
// (sleepMode). Only the waiter calls it, before each sleep.
func (c *recvCQ) sleepNarrow() bool {
	if want := c.mode.next(); want != c.mode.state.Load() {
		c.setMode(want == modeNarrow)
	}
	return c.mode.narrow()
}

// setMode points the channel set and the unicast watch's set at sleeping
// narrow or wide, made only when the mode changes. Sockets are taken out
// of a set rather than left in it with no events: every socket event
// calls every epoll entry on the socket's wait queue, interested or not.
func (c *recvCQ) setMode(narrow bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	type change struct {
		epfd, fd int
		add      bool
	}
	changes := [3]change{
		{c.wideFd, c.q.mcFd, !narrow},
		{c.wideFd, c.q.uniFd, !narrow},
		{c.uniEpFd, c.q.uniFd, narrow},
	}
	for i, ch := range changes {
		if err := epollSet(ch.epfd, ch.fd, ch.add); err != nil {
			for _, undo := range changes[:i] { // back to as we were
				epollSet(undo.epfd, undo.fd, !undo.add)
			}
			return
		}
	}
	if narrow {
		// What came while the waiter slept wide is read by Poll
		// before the next narrow sleep.
		c.uniPending.Store(true)
		c.mode.set(modeNarrow)
	} else {
		c.mode.set(modeWide)
	}
}

// epollSet adds fd to epfd for EPOLLIN, or takes it out.
func epollSet(epfd, fd int, add bool) error {
	if !add {
		return unix.EpollCtl(epfd, unix.EPOLL_CTL_DEL, fd, nil)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
	return unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &ev)
}

// setKick sets the waiter's kick (nil: none). The first kick set starts
// the watch on the unicast socket; it runs until the QP is destroyed.
func (c *recvCQ) setKick(kick func()) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if kick == nil {
		c.kick.Store(nil)
		return nil
	}
	if c.closed {
		return fmt.Errorf("soft: receive channel: %w", verbs.ErrClosed)
	}
	c.kick.Store(&kick)
	if c.watch != nil {
		return nil
	}
	// The watch's file takes over the epoll set (no dup): stopWatch
	// closes it.
	f := os.NewFile(uintptr(c.uniEpFd), "rdmanet-soft-unicast")
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("soft: unicast watch: %w", err)
	}
	c.watch, c.watchDone = f, make(chan struct{})
	go c.watchUnicast(rc, c.watchDone)
	return nil
}

// watchUnicast kicks the waiter whenever the unicast socket has
// datagrams while it sleeps narrow: checked when the watch starts and on
// every readiness edge the netpoller reports (an edge that comes while a
// check runs is kept for the next wait), so none is missed. A waiter
// decides to sleep narrow before its last poll, so a datagram that came
// earlier is found by that poll. It returns when the watch's file is
// closed.
func (c *recvCQ) watchUnicast(rc syscall.RawConn, done chan struct{}) {
	defer close(done)
	evs := make([]unix.EpollEvent, 1)
	rc.Read(func(fd uintptr) bool {
		if n, _ := epollWait(int(fd), evs); n > 0 && c.mode.narrow() {
			c.uniPending.Store(true)
			c.kickWaiter()
		}
		return false // watch until closed
	})
}

// kickWaiter calls the registered kick, if any.
func (c *recvCQ) kickWaiter() {
	if k := c.kick.Load(); k != nil {
		(*k)()
	}
}

// stopWatch ends the unicast watch and waits for its goroutine; closing
// the watch's file closes the epoll set it watched.
func (c *recvCQ) stopWatch() {
	if c.watch != nil {
		c.watch.Close()
		<-c.watchDone
		c.watch = nil
		c.uniEpFd = -1
	}
}

// GetEvents returns 0, nil: readiness is the sockets' own, nothing to
// drain.
func (ch *recvChannel) GetEvents() (int, error) { return 0, nil }

// AckEvents does nothing.
func (ch *recvChannel) AckEvents(int) {}

// pace is how much a read after a wake asks for, learnt from the traffic.
type pace uint8

const (
	// paceStream: wakes find several datagrams; read whole batches.
	paceStream pace = iota
	// paceSingle: each wake brings one datagram (request/response); read
	// one slot, which saves recvmmsg's extra attempt.
	paceSingle
	// paceProbe: a one-slot read happened; the next look tells whether
	// more were already waiting (a stream) or not.
	paceProbe
)

// pollPlan is how one Poll reads: which sockets may hold datagrams
// (drained: known empty), which to read first, and how.
type pollPlan struct {
	drained [2]bool
	start   int
	single  bool // the first read takes one slot (paceSingle)
	probing bool // a one-slot read came before: a datagram found now means a stream
	woken   bool // the channel just woke the waiter
	direct  bool // sleeping narrow: the unicast socket was read only if pending
}

// Poll reads datagrams into the posted receive buffers, at most as many as
// there are posted receives and as fit in wcs, validates them (headers,
// Q_Key, destination, ICRC), fills the GRH area and returns their
// completions. Datagrams that fail validation are dropped and counted by
// reason, and their buffers stay posted. It never blocks.
func (c *recvCQ) Poll(wcs []verbs.WC) (int, error) { return c.poll(wcs, false) }

// poll is Poll; woken says that the channel just woke the waiter (which
// alone passes true: recvWaiter.Poll), so something is there.
func (c *recvCQ) poll(wcs []verbs.WC, woken bool) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.q.usable("ibv_poll_cq", c.closed); err != nil {
		return 0, err
	}
	if c.n == 0 {
		c.groNoReceives() // polled with no receive posted (gro.go)
		return 0, nil
	}
	if c.gro.pending() { // what the last read left comes first (gro.go)
		n := c.completeCopied(wcs)
		c.gro.release()
		if n > 0 || c.gro.pending() {
			return n, nil
		}
	}
	if c.full {
		c.full = false
		if len(c.msgs) < c.maxScratch {
			c.growScratch(min(2*len(c.msgs), c.maxScratch))
		}
	}
	var p pollPlan
	var err error
	turn := c.turn // which socket a read not after a wake starts with
	c.turn ^= 1
	switch {
	case woken:
		p = c.planWoken()
	case c.mode.narrow():
		p = c.planNarrow(turn)
	default:
		if p, err = c.planWide(turn); err != nil {
			return 0, err
		}
	}
	n, err := c.read(&p, wcs)
	if p.direct && !p.drained[1] {
		c.uniPending.Store(true) // not read dry: read it next time
	}
	return n, err
}

// planWoken: just woken by the channel, so something is there, most
// likely where the last datagram came from: read there first.
func (c *recvCQ) planWoken() pollPlan {
	return pollPlan{start: c.last, woken: true, single: c.pace != paceStream}
}

// planNarrow: sleeping narrow, read the multicast socket directly (a
// one-slot read that finds nothing costs less than the epoll_wait), and
// the unicast socket only when the watch saw datagrams there or the mode
// just became narrow: otherwise its datagrams kick the waiter, which then
// polls again.
func (c *recvCQ) planNarrow(turn int) pollPlan {
	p := pollPlan{start: turn, direct: true, single: c.pace != paceStream}
	p.drained[1] = !(c.uniPending.Load() && c.uniPending.Swap(false))
	if c.pace == paceProbe {
		p.probing, c.pace = true, paceSingle
	}
	return p
}

// planWide: sleeping wide, ask the channel set which sockets have
// datagrams, one syscall for both, and read only those.
func (c *recvCQ) planWide(turn int) (pollPlan, error) {
	p := pollPlan{start: turn, drained: [2]bool{true, true}}
	nev, err := epollWait(c.wideFd, c.evs[:])
	if err != nil && err != unix.EINTR {
		return p, fmt.Errorf("soft: ibv_poll_cq: %w", os.NewSyscallError("epoll_wait", err))
	}
	if c.pace == paceProbe {
		// The last wake read one datagram; more already waiting means
		// a stream, where wakes should read whole batches.
		c.pace = paceSingle
		if nev > 0 {
			c.pace = paceStream
		}
	}
	for _, ev := range c.evs[:max(nev, 0)] {
		if int(ev.Fd) == c.q.mcFd {
			p.drained[0] = false
		} else if int(ev.Fd) == c.q.uniFd {
			p.drained[1] = false
		}
	}
	c.mcDry = c.mcDry || p.drained[0] // an empty multicast socket is dry too
	return p, nil
}

// read reads as p says until a completion is found or both sockets are
// dry: a reader sleeps on the channel only after Poll returned 0, and the
// channel must not be readable then (bad datagrams are dropped on the
// way).
func (c *recvCQ) read(p *pollPlan, wcs []verbs.WC) (int, error) {
	socks := [2]int{c.q.mcFd, c.q.uniFd}
	n := 0
	for round := 0; n < len(wcs) && c.n > 0 && !(p.drained[0] && p.drained[1]); round++ {
		s := (p.start + round) & 1
		if p.drained[s] {
			continue
		}
		k := min(len(wcs)-n, c.n, len(c.msgs))
		if p.single && n == 0 {
			// A waiter that slept wants one datagram soon; anything
			// else queued stays for the next Poll (the channel stays
			// readable).
			k = 1
			c.pace = paceProbe
		}
		got, err := c.recv(socks[s], k, c.chooseBare(s))
		if err == unix.EAGAIN {
			p.drained[s] = true
			c.mcDry = c.mcDry || s == 0
			continue
		}
		if err != nil {
			return n, fmt.Errorf("soft: ibv_poll_cq: %w", os.NewSyscallError("recvmmsg", err))
		}
		if got < k {
			p.drained[s] = true
			c.mcDry = c.mcDry || s == 0
		} else if got == len(c.msgs) {
			c.full = true // a stream: read bigger batches from the next Poll
		}
		n += c.complete(s, got, wcs[n:])
		if got > 0 {
			c.learn(p, s, got)
		}
		if n > 0 && (p.drained[s] || p.single) {
			// Deliver now rather than spend a syscall on the other
			// socket; the next Poll starts there.
			break
		}
	}
	return n, nil
}

// learn notes where got datagrams came from and what that says of the
// traffic.
func (c *recvCQ) learn(p *pollPlan, sock, got int) {
	c.last = sock
	if sock == 1 {
		c.mode.heard()
	}
	switch {
	case p.probing && sock == 0:
		c.pace = paceStream // one was already waiting: a stream
	case p.woken && !p.single && got == 1:
		c.pace = paceSingle // one datagram per wake: request/response
	}
}

// chooseBare decides whether the read of socket sock is bare (no control
// messages) and sets the multicast socket's IP_RECVORIGDSTADDR to match.
func (c *recvCQ) chooseBare(sock int) bool {
	c.bare, c.bareDst = false, [4]byte{}
	if c.q.addrOnly {
		if sock == 1 {
			c.bare, c.bareDst = true, c.q.unicast
		} else if c.soleOK && c.mcDry {
			c.bare, c.bareDst = true, c.sole
		}
		if sock == 0 {
			c.mcOrigDst(!c.bare)
		}
	}
	if c.bare {
		c.nBare++
	}
	return c.bare
}

// inPlaceSlack is what a posted buffer needs past GRH + MTU for the
// largest datagram to land in it whole: ImmDt, pad and ICRC.
const inPlaceSlack = roce.ImmDtSize + 3 + roce.ICRCSize

// recv points the first k scratch slots at the first k posted buffers and
// reads up to k datagrams. A buffer with room for the largest datagram
// gets it whole, in place: BTH and DETH in the last 20 bytes of the GRH
// area (rewritten as the GRH once they are read), the payload where it
// belongs, one iovec (the kernel's cheapest import). A shorter one gets
// the datagram scattered over the header scratch, the buffer and the tail
// scratch. The parts of each slot that never change (scratch iovecs, name
// and control buffers) were set once by initScratch: only the buffer's
// iovec and the lengths the kernel overwrites are reset. A bare read asks
// for no control messages, and one datagram in place is read with
// recvfrom, the kernel's cheapest receive. A read of a socket with GRO
// gives each slot an overflow too, its row of the GRO area (gro.go), and
// room for the UDP_GRO message even when bare.
func (c *recvCQ) recv(fd, k int, bare bool) (int, error) {
	ctrlLen := ctrlSize
	if bare {
		ctrlLen = 0
	}
	var area *groArea
	if c.gro.on[c.sockIndex(fd)] {
		if err := c.gro.hold(); err != nil {
			return 0, err
		}
		area = c.gro.area
		if bare {
			ctrlLen = groCtrl
		}
	}
	j := c.head
	for i := range k {
		if j == len(c.rq) {
			j = 0
		}
		buf := c.rq[j].buf
		j++
		m := &c.msgs[i]
		if len(buf) >= verbs.GRHSize+c.q.mtu+inPlaceSlack {
			region := buf[verbs.GRHSize-roce.HdrSize:]
			m.Hdr.Iov = &c.iov[i][3]
			m.Hdr.SetIovlen(1)
			if area != nil {
				// Cut to the largest datagram, so that the region fits
				// in front of the row's overflow (groPrefix).
				region = region[:roce.HdrSize+c.q.mtu+inPlaceSlack]
				setIov(&c.iov[i][4], area.row(i)[groPrefix:])
				m.Hdr.SetIovlen(2)
			}
			setIov(&c.iov[i][3], region)
		} else {
			setIov(&c.iov[i][1], buf[verbs.GRHSize:])
			m.Hdr.Iov = &c.iov[i][0]
			m.Hdr.SetIovlen(3)
			if area != nil {
				setIov(&c.iov[i][3], area.row(i)[groPrefix:])
				m.Hdr.SetIovlen(4)
			}
		}
		m.Hdr.Namelen = unix.SizeofSockaddrInet4
		m.Hdr.SetControllen(ctrlLen)
		m.Hdr.Flags = 0
		m.Len = 0
	}
	var got int
	var err error
	switch {
	case k == 1 && bare && c.msgs[0].Hdr.Iovlen == 1:
		return recvfromOne(fd, &c.msgs[0], unix.MSG_DONTWAIT) // no GRO: no area held
	case k == 1:
		got, err = recvmsgOne(fd, c.msgs[:1], unix.MSG_DONTWAIT)
	default:
		got, err = recvmmsg(fd, c.msgs[:k], unix.MSG_DONTWAIT)
	}
	if got == 0 {
		c.gro.release()
		if s := c.sockIndex(fd); err == unix.EAGAIN && c.gro.on[s] && !c.gro.active[s] {
			c.gro.on[s] = false // read dry since GRO went off: no run left
		}
	}
	return got, err
}

// sockIndex is 0 for the multicast socket's fd, 1 for the unicast one's.
func (c *recvCQ) sockIndex(fd int) int {
	if fd == c.q.uniFd {
		return 1
	}
	return 0
}

// initScratch sets the constant parts of the recvmmsg scratch slots.
func (c *recvCQ) initScratch() {
	for i := range c.msgs {
		setIov(&c.iov[i][0], c.hdr[i][:])
		setIov(&c.iov[i][2], c.tail[i][:])
		m := &c.msgs[i]
		m.Hdr.Name = (*byte)(unsafe.Pointer(&c.names[i]))
		m.Hdr.Iov = &c.iov[i][0]
		m.Hdr.SetIovlen(3)
		m.Hdr.Control = &c.ctrl[i][0]
	}
}

// complete validates the got datagrams read into the first got posted
// buffers and fills wcs. With GRO (gro.go) the slots from the first one
// that was coalesced or spilled into its overflow on complete by copy, and
// what does not fit wcs or the posted receives stays pending.
func (c *recvCQ) complete(sock, got int, wcs []verbs.WC) int {
	first := got
	if c.gro.area != nil {
		first = c.firstCopied(got)
	}
	if first < got {
		c.moveOut(first, got)
	}
	n := c.completeInPlace(sock, first, wcs)
	if first < got {
		c.startCopied(sock, first, got)
		n += c.completeCopied(wcs[n:])
	}
	c.gro.release()
	c.groLearn(sock, first < got)
	return n
}

// completeInPlace validates the got datagrams that landed in the first got
// posted buffers, fills wcs and fixes the receive queue: consumed entries
// leave, the others go back to the front in order.
func (c *recvCQ) completeInPlace(sock, got int, wcs []verbs.WC) int {
	kept, n := 0, 0
	for i := range got {
		e := c.rq[wrap(c.head+i, len(c.rq))]
		r := c.accept(sock, i, e, &wcs[n])
		if r == roce.Accepted {
			n++
			continue
		}
		c.q.drops[r].Add(1)
		c.kept[kept] = e
		kept++
	}
	// Consume got entries, then put the kept ones back at the front.
	c.head = wrap(c.head+got, len(c.rq))
	c.n -= got
	for j := kept - 1; j >= 0; j-- {
		c.head = wrap(c.head-1+len(c.rq), len(c.rq))
		c.rq[c.head] = c.kept[j]
		c.n++
	}
	return n
}

// rxView is a received datagram scattered over the header scratch, the
// posted buffer past its GRH area and the tail scratch.
type rxView struct{ s [3][]byte }

func (v *rxView) crc(crc uint32, from, to int) uint32 {
	for _, s := range v.s {
		if from >= to {
			break
		}
		if from < len(s) {
			crc = roce.CRCUpdate(crc, s[from:min(len(s), to)])
		}
		from = max(from-len(s), 0)
		to -= len(s)
	}
	return crc
}

// copyOut copies len(dst) bytes at from to dst (memmove semantics within
// one segment).
func (v *rxView) copyOut(dst []byte, from int) {
	for _, s := range v.s {
		if len(dst) == 0 {
			return
		}
		if from < len(s) {
			k := copy(dst, s[from:])
			dst = dst[k:]
			from = 0
			continue
		}
		from -= len(s)
	}
}

// forUs checks a datagram's destination QP (this QP, or a group the QP
// receives from on the multicast socket) and Q_Key.
func (c *recvCQ) forUs(h *roce.Header, sock int, dst [4]byte) roce.DropReason {
	switch {
	case h.DestQPN == c.q.qpn:
	case h.DestQPN == verbs.MulticastQPN && sock == 0:
		if g := c.findGroup(dst); g < 0 || c.groups[g].sendOnly {
			return roce.DropNotForUs
		}
	default:
		return roce.DropNotForUs
	}
	if h.QKey != c.q.qkey {
		return roce.DropBadQKey
	}
	return roce.Accepted
}

// checkICRC checks the ICRC of v (n bytes from src:sport to dst) and
// returns the IP ID and DF flag that make it match, which the socket
// does not show (see roce.SolveIPv4ID); ok is false when none does.
func (c *recvCQ) checkICRC(v *rxView, src [4]byte, sport uint16, dst [4]byte, n int) (id uint16, df, ok bool) {
	// Guess ID 0 with DF, as RoCEv2 senders send (rxe, NICs, this
	// backend): then the difference to solve is 0 and solving is free.
	crc := c.icrc.Start(src, dst, 0, true, sport, roce.UDPPort, roce.UDPHdrSize+n, v.s[0])
	crc = v.crc(crc, roce.HdrSize, n-roce.ICRCSize)
	var icrc [roce.ICRCSize]byte
	v.copyOut(icrc[:], n-roce.ICRCSize)
	id, dfFlipped, ok := roce.Solve(roce.UDPHdrSize+n, crc^binary.LittleEndian.Uint32(icrc[:]))
	return id, !dfFlipped, ok
}

// view is datagram i of n bytes, which landed in buf (and, scattered, in
// slot i's scratch), and its first hdrSize bytes.
func (c *recvCQ) view(i int, buf []byte, n int) (v rxView, hdr []byte) {
	if c.msgs[i].Hdr.Iov == &c.iov[i][3] { // in place: the datagram is whole from GRH-20
		v.s[0] = buf[verbs.GRHSize-roce.HdrSize:][:n]
		return v, v.s[0][:min(n, roce.HdrSize)]
	}
	body := buf[verbs.GRHSize:]
	v.s[0] = c.hdr[i][:min(n, roce.HdrSize)]
	rest := max(n-roce.HdrSize, 0)
	v.s[1] = body[:min(rest, len(body))]
	v.s[2] = c.tail[i][:rest-len(v.s[1])]
	return v, v.s[0]
}

// accept validates datagram i, which landed in e's buffer, and on success
// fills wc.
func (c *recvCQ) accept(sock, i int, e rqEntry, wc *verbs.WC) roce.DropReason {
	q := c.q
	m := &c.msgs[i]
	n := int(m.Len)
	meta := &c.meta
	if c.bare {
		*meta = rxMeta{dst: c.bareDst}
	} else {
		parseCmsgs(c.ctrl[i][:m.Hdr.Controllen], meta)
		if meta.hasOvfl {
			q.noteSockDrops(sock, meta.ovfl)
		}
	}
	if m.Hdr.Flags&unix.MSG_TRUNC != 0 {
		return roce.DropTooLong
	}
	body := e.buf[verbs.GRHSize:]
	v, hdr := c.view(i, e.buf, n)

	h := &c.hd
	if r := roce.DecodeHeaders(hdr, n, h); r != roce.Accepted {
		return r
	}
	if h.HasImm() {
		var imm [roce.ImmDtSize]byte
		v.copyOut(imm[:], roce.HdrSize)
		h.Imm = binary.BigEndian.Uint32(imm[:])
	}
	if r := c.forUs(h, sock, meta.dst); r != roce.Accepted {
		return r
	}
	plen := h.PayloadLen(n)
	if plen > len(body) {
		return roce.DropTooLong
	}
	src := c.names[i].Addr
	// Own multicast looped back by the kernel is dropped before the ICRC
	// is computed: a sender that also receives (a reliable conn, for its
	// NAKs) would otherwise check every datagram it sent.
	if q.blockSelf && h.SrcQPN == q.qpn && src == q.unicast {
		return roce.DropSelf
	}
	id, df, ok := c.checkICRC(&v, src, ntohs(c.names[i].Port), meta.dst, n)
	if !ok {
		return roce.DropBadICRC
	}
	c.gro.seen = c.gro.seen || id != 0 // a later segment of a run (gro.go)
	if h.HasImm() {
		v.copyOut(body[:plen], roce.MaxHdrSize)
	}
	c.accepted(e, wc, h, meta, src, id, df, n, plen)
	return roce.Accepted
}

// accepted fills, for a datagram of n bytes (plen of payload) that passed
// every check, the GRH area of e's buffer and its completion.
func (c *recvCQ) accepted(e rqEntry, wc *verbs.WC, h *roce.Header, meta *rxMeta, src [4]byte, id uint16, df bool, n, plen int) {
	roce.FillGRH(e.buf[:verbs.GRHSize], src, meta.dst, meta.tos, meta.ttl, id, df, n)
	*wc = verbs.WC{
		WRID:    e.wrid,
		Status:  verbs.WCSuccess,
		Opcode:  verbs.WCRecv,
		Flags:   verbs.WCGRH,
		ByteLen: uint32(verbs.GRHSize + plen),
		QPN:     c.q.qpn,
		SrcQP:   h.SrcQPN,
	}
	if h.HasImm() {
		wc.Flags |= verbs.WCWithImm
		wc.Imm = h.Imm
	}
}
