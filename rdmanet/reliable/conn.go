package reliable

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-rdma/rdmanet/internal/netaddr"
	"github.com/go-rdma/rdmanet/rdmanet"
	"github.com/go-rdma/rdmanet/rdmanet/internal/unread"
)

// Conn is a reliable multicast conn over an *rdmanet.Conn, as a
// net.PacketConn: every message each sender writes to the group is read by
// every member exactly once and in that sender's order, or reported lost
// with a *LossError.
//
// Reads are serialized among themselves, and so are writes. A conn does
// not read its own messages.
type Conn struct {
	conn     *rdmanet.Conn
	cfg      Config
	group    rdmanet.Addr // the group's MGID form, for WriteBatch
	groupArg net.Addr     // the group as given, to compare writes with
	local    rdmanet.Addr
	session  uint32
	mtu      int // datagram size of the underlying conn
	stride   int // distance between datagram slots in the rings (slotStride)
	frag     int // payload bytes per datagram

	snd sender
	rcv receiver
	rx  rxState // who reads the underlying conn: rx.go

	stats counters

	readMu     sync.Mutex
	readNow    int64 // readMu: the clock of the reader's last inline read in this call (0: none)
	readTimer  *time.Timer
	readDL     atomic.Int64 // unix nanos, 0: none
	writeDL    atomic.Int64
	closing    atomic.Bool
	closed     chan struct{}
	closeOnce  sync.Once
	closeErr   error
	kick       chan struct{} // wakes the timer loop
	wake       wakeTimer     // the timer loop's fine sleeps: timer_linux.go
	looks      atomic.Uint64 // the timer loop's passes (tests: an idle loop sleeps)
	wg         sync.WaitGroup
	dropHook   func(b []byte) bool                         // tests: drop a received datagram when true
	inputHook  func() bool                                 // tests: stands for the underlying conn's unread check
	sendHook   func(seq uint64, repair bool, at int64)     // tests: each data datagram staged and each repair, under snd.mu
	postHook   func(ms []rdmanet.Message) (int, error)     // tests: stands for the underlying conn's WriteBatch when a write posts its data
	gapHook    func(from peerKey, lo, hi uint64, at int64) // tests: datagrams [lo, hi) of from first known missing, under rcv.mu
	epochStart time.Time
	auth       *authState // Config.Key: auth.go; nil without a key
}

var _ net.PacketConn = (*Conn)(nil)

// New runs a reliable conn over c, which must have joined group. The
// reliable conn owns c from then on: Close closes it, and nothing else may
// read from it. When New fails, c is left as it was, still the caller's.
func New(c *rdmanet.Conn, group net.Addr, cfg Config) (*Conn, error) {
	return newConn(c, group, cfg, nil)
}

// newConn is New with a test hook: drop, when not nil, sees every datagram
// received and drops it by returning true.
func newConn(c *rdmanet.Conn, group net.Addr, cfg Config, drop func([]byte) bool) (*Conn, error) {
	if c == nil {
		return nil, errors.New("reliable: New: the *rdmanet.Conn is nil")
	}
	ga, err := c.GroupAddr(group)
	if err != nil {
		return nil, err
	}
	mtu := c.MTU()
	if err := cfg.guardDefaults(); err != nil {
		return nil, err
	}
	if err := cfg.setDefaults(mtu - cfg.trailer()); err != nil {
		return nil, err
	}
	var sb [4]byte
	if _, err := rand.Read(sb[:]); err != nil {
		return nil, err
	}
	rc := &Conn{
		conn:       c,
		cfg:        cfg,
		group:      ga,
		groupArg:   group,
		local:      *c.LocalAddr().(*rdmanet.Addr),
		session:    binary.BigEndian.Uint32(sb[:]),
		mtu:        mtu,
		stride:     slotStride(mtu),
		frag:       mtu - headerLen - cfg.trailer(),
		closed:     make(chan struct{}),
		kick:       make(chan struct{}, 1),
		epochStart: time.Now(),
		dropHook:   drop,
	}
	if err := rc.wake.init(); err != nil {
		return nil, err
	}
	rc.snd.init(rc)
	rc.rcv.init(rc)
	rc.initAuth()
	rc.rx.init(rc)
	rc.readTimer = time.AfterFunc(time.Hour, rc.rcv.wake)
	rc.readTimer.Stop()
	rc.wg.Add(2)
	go rc.receiveLoop()
	go rc.timerLoop()
	return rc, nil
}

// now is the conn's monotonic clock in nanoseconds.
func (c *Conn) now() int64 { return int64(time.Since(c.epochStart)) }

// MaxMessage returns the longest message a write may carry.
func (c *Conn) MaxMessage() int { return c.cfg.MaxMessage }

// Session returns the conn's session: a random number that, with its QP,
// names it as a sender.
func (c *Conn) Session() uint32 { return c.session }

// Receivers returns how many receivers this conn knows by their status
// and has heard from (status or heartbeat) within ReceiverTimeout. A FlowMin sender waits only for the
// receivers it knows: a program that must not outrun a receiver that is
// starting waits for it here before writing, as Aeron's publications wait
// to be connected.
func (c *Conn) Receivers() int {
	s := &c.snd
	s.mu.Lock()
	defer s.mu.Unlock()
	now, n := c.now(), 0
	for _, r := range s.receivers {
		if now-r.heard <= int64(c.cfg.ReceiverTimeout) {
			n++
		}
	}
	return n
}

// WindowRegistered reports whether the retransmit window is registered
// memory (an rdmanet.SendBuffer), sends and repairs posted from it with no
// copy; when not, the error that registering it returned (registered
// memory is pinned: RLIMIT_MEMLOCK, `ulimit -l`, bounds it for a process
// without CAP_IPC_LOCK on rdma-core), and writes copy from a window in Go
// memory instead.
func (c *Conn) WindowRegistered() (bool, error) {
	return c.snd.win != nil, c.snd.winErr
}

// Conn returns the underlying conn, for its Stats and Backend. Do not read
// from it or close it: its Close frees the sender's window (a
// SendBuffer of it) under the reliable conn.
func (c *Conn) Conn() *rdmanet.Conn { return c.conn }

// LocalAddr returns the conn's own address: its GID and QPN.
func (c *Conn) LocalAddr() net.Addr { return c.conn.LocalAddr() }

// SetDeadline sets the read and write deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

// SetReadDeadline sets the deadline for reads, including one blocked now.
func (c *Conn) SetReadDeadline(t time.Time) error {
	if c.closing.Load() {
		return c.opError("set", nil, net.ErrClosed)
	}
	dl := unixNanos(t)
	c.readDL.Store(dl)
	c.rxSetDeadline(dl)
	c.rcv.wake()
	return nil
}

// SetWriteDeadline sets the deadline for writes, which wait only with
// FlowMin or for a send slot of the underlying conn. It bounds the
// caller's writes only: once it has passed, the conn still sends its
// heartbeats, repairs, NAKs and status.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	if c.closing.Load() {
		return c.opError("set", nil, net.ErrClosed)
	}
	dl := unixNanos(t)
	c.writeDL.Store(dl)
	c.snd.setDeadline(dl)
	c.snd.wake()
	return nil
}

func unixNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func (c *Conn) opError(op string, addr net.Addr, err error) error {
	if err == nil {
		return nil
	}
	return &net.OpError{Op: op, Net: "rdma", Source: c.conn.LocalAddr(), Addr: addr, Err: err}
}

// ReadFrom reads the next message of any sender into b and returns its
// length and sender (an *rdmanet.Addr; the same pointer for every message
// of that sender: do not change it). A message longer than b is truncated,
// as with UDP. Where messages of a sender were lost, ReadFrom returns
// once, at their place in its stream, n = 0, the sender, and a
// *net.OpError wrapping a *LossError; reading goes on after it.
func (c *Conn) ReadFrom(b []byte) (int, net.Addr, error) {
	c.readMu.Lock()
	defer c.readMu.Unlock()
	c.readNow = 0
	c.rxEnter()
	defer c.rxLeave()
	for {
		n, from, loss, ok := c.rcv.next(b, c.readNow)
		if ok {
			if loss != nil {
				return 0, from, c.opError("read", from, loss)
			}
			return n, from, nil
		}
		if err := c.waitRead(false, b); err != nil {
			return 0, nil, err
		}
		if r := &c.rcv; r.directOK { // readInline delivered into b
			r.directOK = false
			return r.directN, r.directFrom, nil
		}
	}
}

// ReadBatch reads up to len(ms) messages, each into its Buffer: it blocks
// until at least one is ready and then returns every ready one, with one
// wake-up for the batch, in the order ReadFrom would hand them out. Each
// message gets its length N, its sender Addr and Truncated, set when the
// message was longer than Buffer. Where messages of a sender were lost,
// the batch ends before the place of the loss in the stream and the next
// call returns it alone: 0 and a *net.OpError wrapping a *LossError
// (whose From names the sender; ms[0].Addr is set to it too). Reading goes
// on after it, as with ReadFrom.
func (c *Conn) ReadBatch(ms []rdmanet.Message) (int, error) {
	if len(ms) == 0 {
		if c.closing.Load() {
			return 0, c.opError("read", nil, net.ErrClosed)
		}
		return 0, nil
	}
	c.readMu.Lock()
	defer c.readMu.Unlock()
	c.readNow = 0
	c.rxEnter()
	defer c.rxLeave()
	for {
		k, from, loss := c.rcv.nextBatch(ms)
		if loss != nil {
			ms[0].N, ms[0].Truncated, ms[0].Addr = 0, false, *from
			return 0, c.opError("read", from, loss)
		}
		if k > 0 {
			return k, nil
		}
		if err := c.waitRead(true, nil); err != nil {
			return 0, err
		}
	}
}

// waitRead waits for a message to be ready, for the read deadline or for
// Close, with c.readMu held: by reading the underlying conn itself when
// it holds it (rx.go), else for the receive loop to ready one (and hand
// the underlying conn over). The caller looks again after it. batch: the
// caller is ReadBatch, which takes every datagram there.
func (c *Conn) waitRead(batch bool, b []byte) error {
	if c.closing.Load() {
		return c.opError("read", nil, net.ErrClosed)
	}
	dl := c.readDL.Load()
	if dl != 0 && dl-time.Now().UnixNano() <= 0 {
		return c.opError("read", nil, os.ErrDeadlineExceeded)
	}
	if c.rxTake() {
		return c.readInline(batch, b)
	}
	timed := false
	if dl != 0 {
		c.readTimer.Reset(time.Duration(dl - time.Now().UnixNano()))
		timed = true
	}
	// One channel: the receive loop, the deadline's timer, SetReadDeadline
	// and Close all send to notify, and the caller looks again. A select
	// over several channels would take a runtime sudog per channel at each
	// park, and those drift between the Ps' caches (an allocation about
	// once in ten parks on two Ps).
	<-c.rcv.notify
	if timed {
		c.readTimer.Stop()
	}
	return nil
}

// WriteTo writes b as one message to the group. addr is the group in any
// form the underlying conn's JoinGroup takes (the *net.UDPAddr given to
// ListenMulticast or New, or the same group's *net.IPAddr or
// *rdmanet.Addr), or nil: a reliable conn sends only to its group, so
// nil and a nil pointer (*net.UDPAddr, *net.IPAddr, *rdmanet.Addr) name
// it, as a nil Addr names a connected socket's peer in
// golang.org/x/net/ipv4. Any other address fails with ErrWriteAddr.
// Messages up to MaxMessage bytes are cut into datagrams as needed.
//
// An error means the message was not written, and writing it again
// delivers it once. When the underlying conn fails part way through a
// message's datagrams (a deadline, the link going down), the message
// is written all the same: the receivers know of it and get the rest by
// repair, and WriteTo returns no error; the next write meets the
// failure.
func (c *Conn) WriteTo(b []byte, addr net.Addr) (int, error) {
	if c.closing.Load() { // first: the group lookup fails once closed
		return 0, c.opError("write", addr, net.ErrClosed)
	}
	if !c.isGroup(addr) {
		return 0, c.opError("write", addr, ErrWriteAddr)
	}
	if len(b) > c.cfg.MaxMessage {
		return 0, c.opError("write", addr, &messageTooLongError{len(b), c.cfg.MaxMessage})
	}
	one := [1]rdmanet.Message{{Buffer: b}}
	if _, err := c.snd.write(one[:]); err != nil {
		return 0, c.opError("write", addr, err)
	}
	return len(b), nil
}

// isGroup reports whether addr names the conn's group for a write.
func (c *Conn) isGroup(addr net.Addr) bool {
	if addr == c.groupArg || netaddr.IsNil[*rdmanet.Addr](addr) {
		return true
	}
	ga, err := c.conn.GroupAddr(addr)
	return err == nil && ga.GID == c.group.GID
}

// WriteBatch writes the Buffer of each of ms as one message to the group,
// in order, as WriteTo would one at a time, posting as many datagrams at
// a time as it can (up to 64, or a largest message's fragments). Each
// message's Addr is the group's (GroupAddr of the underlying conn, as
// ReadBatch returns a sender's) or the zero Addr, which names the group
// as nil does for WriteTo; anything else fails with ErrWriteAddr. It
// sets N of each message sent and returns how many were; on an error,
// the ones before it were sent, as with rdmanet.Conn.WriteBatch: a
// message longer than MaxMessage or with another Addr is the error, and
// the ones after it are not sent. The count is exact when the underlying
// conn fails part way, as for WriteTo: a message with any datagram posted
// is written and counted (its rest comes by repair); those after it are
// not in the window, and may be written again without a receiver reading
// one twice.
func (c *Conn) WriteBatch(ms []rdmanet.Message) (int, error) {
	if c.closing.Load() {
		return 0, c.opError("write", nil, net.ErrClosed)
	}
	n := len(ms)
	var bad error
	var badAddr net.Addr
	for i := range ms {
		m := &ms[i]
		if m.Addr != (rdmanet.Addr{}) && m.Addr.GID != c.group.GID {
			n, bad, badAddr = i, ErrWriteAddr, &m.Addr
			break
		}
		if len(m.Buffer) > c.cfg.MaxMessage {
			n, bad = i, &messageTooLongError{len(m.Buffer), c.cfg.MaxMessage}
			break
		}
	}
	k, err := c.snd.write(ms[:n])
	for i := range ms[:k] {
		ms[i].N = len(ms[i].Buffer)
	}
	if err == nil && bad != nil {
		return k, c.opError("write", badAddr, bad)
	}
	return k, c.opError("write", nil, err)
}

// Close stops writes, keeps serving repairs for up to Config.Linger until
// every live receiver reports it holds all this conn sent, then leaves the
// group and frees everything. As with rdmanet.Conn (and net.UDPConn),
// only the first call closes: later ones return a *net.OpError (Op
// "close") wrapping net.ErrClosed.
func (c *Conn) Close() error {
	first := false
	c.closeOnce.Do(func() {
		first = true
		c.closing.Store(true)
		c.rxGiveBack(c.now(), true) // the receive loop hears the receivers while lingering
		c.snd.linger()
		close(c.closed)
		c.kickTimers()
		c.rcv.wake()
		c.snd.stop() // the window goes with the conn
		c.closeErr = c.conn.Close()
		c.wg.Wait()
		c.readTimer.Stop()
		c.wake.close()
	})
	if !first {
		return c.opError("close", nil, net.ErrClosed)
	}
	return c.closeErr
}

// recvBatch is how many datagrams are taken from the rdmanet conn at a
// time (one completion-queue poll for the batch).
const recvBatch = 32

// handle takes one datagram read from the underlying conn; now is the
// clock read once for its batch.
func (c *Conn) handle(b []byte, from rdmanet.Addr, h *header, now int64) {
	if c.auth != nil {
		var ok bool
		if b, ok = c.open(b, from, now); !ok {
			return
		}
	}
	if c.dropHook != nil && c.dropHook(b) { // keyed: it sees the datagram as opened
		return
	}
	p, err := decode(b, h)
	if err != nil {
		c.stats.malformed.Add(1)
		return
	}
	if h.session == c.session && from == c.local {
		c.stats.own.Add(1) // looped back, or forged
		return
	}
	switch h.kind {
	case kindData:
		c.rcv.data(from, h, b, now)
	case kindHeartbeat:
		c.rcv.heartbeat(from, h, p)
		c.snd.heard(from, h.session, now)
	case kindLost:
		c.rcv.lost(from, h)
	case kindNAK:
		target, count, rtt := parseNAK(p)
		if target != c.session {
			c.stats.foreign.Add(1)
			return
		}
		c.stats.naksReceived.Add(1)
		// What it pays for: nakPays times its length on the wire.
		c.snd.nak(from, h, count, int64(rtt), nakPays*(len(b)+c.cfg.trailer()))
	case kindStatus:
		target, limit := parseStatus(p)
		if target != c.session {
			c.stats.foreign.Add(1)
			return
		}
		c.snd.status(from, h, limit)
	}
}

// fineBelow: while a NAK is pending, delays shorter than this are slept
// on c.wake, a timerfd in the netpoller (timer_linux.go), which ends
// them within the thread's wake-up and leaves the P to the readers
// meanwhile; other sleeps take a runtime timer, which sleeps at least
// about a millisecond when the process is idle (the netpoller's
// epoll_wait counts in milliseconds) and costs no system call. (The
// timerfd for every sleep was tried: 5 µs more at the p50 at 0% loss,
// 3 receivers and a sender in one process on 2 vCPUs, against the plain
// conn's 18 µs. Spinning instead would hold a processor: with a few
// conns in one process, their timer loops spinning at once starved the
// receive loops, 100 ms stalls on 2 cores.)
const fineBelow = int64(500 * time.Microsecond)

// timerLoop runs NAK timers, heartbeats, status reports and timeouts.
func (c *Conn) timerLoop() {
	defer c.wg.Done()
	// The loop parks on one channel: kick, which the timer below, writers
	// and Close send to. A select over several channels takes a runtime
	// sudog per channel at each park, and those drift between the Ps'
	// caches, so a three-way select allocated about once in ten wakeups on
	// two Ps; a one-channel receive does not (TestNoAllocs).
	t := time.AfterFunc(time.Hour, c.kickTimers)
	defer t.Stop()
	defer c.snd.hbTimer.Stop()
	for {
		select {
		case <-c.closed:
			return
		default: // a select with a default never parks
		}
		c.looks.Add(1)
		now := c.now()
		next := min(c.rcv.tick(now), c.snd.tick(now))
		if n := c.rxGiveBack(now, false); n != 0 { // 0: no need to look
			next = min(next, n)
		}
		d := next - c.now()
		if d <= 0 {
			continue
		}
		if d < fineBelow && fineTimer && c.rcv.nakPending() {
			c.wake.sleep(time.Duration(d))
			continue
		}
		t.Reset(time.Duration(d))
		<-c.kick
	}
}

// kickTimers wakes the timer loop to look at its deadlines again.
// A kick wakes both of its sleeps: the one it is not in returns at once
// the next time, and the loop looks again.
func (c *Conn) kickTimers() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
	if fineTimer {
		c.wake.kick()
	}
}

// inputWaits reports whether datagrams received wait to be handled: read
// from the underlying conn and not handled yet, or not read from it yet
// (rdmanet/pending.go says when it can tell; when it cannot, false).
func (c *Conn) inputWaits() bool {
	if c.rx.handling.Load() {
		return true
	}
	if c.inputHook != nil {
		return c.inputHook()
	}
	if unread.Check == nil {
		return false
	}
	u, _ := unread.Check(c.conn)
	return u
}
