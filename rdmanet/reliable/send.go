package reliable

import (
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// sender is the sending half: the retransmit window, repairs, heartbeats
// and flow control.
//
// The window is a ring of Window datagram slots, each a whole datagram
// (header and payload) as sent, in registered memory: an
// rdmanet.SendBuffer of the conn. Every send and every repair is posted
// from its slot there by the slot's MR, with no copy; a repair resends
// the slot as it is, with the repair flag and a new transmission number
// written into its header in place.
//
// The device reads a slot after the post returned, so a slot is not
// written while its last send may be in flight: posted holds, per slot,
// rdmanet's send count after the post that sent it (SendsPosted), and the
// slot may change once SendsDone has reached it. A write that reuses a
// slot waits for that (bounded by the write deadline; WindowWaits counts
// it, and with a window of many sends it is already done). A NAK for a
// slot whose last send has not completed is not answered now
// (RepairsDeferred): that send is on its way, and a receiver that still
// misses it asks again.
type sender struct {
	c  *Conn
	mu sync.Mutex

	wi       ringIndex           // Window slots (wi.n), and the slot of a sequence
	win      *rdmanet.SendBuffer // nil: the window is Go memory (winErr says why)
	winErr   error
	buf      []byte   // w slots of mtu bytes, c.stride apart, in win
	posted   []uint64 // per slot: SendsPosted after its last post
	done     uint64   // SendsDone as last read
	dead     bool     // Close is freeing win: nothing may touch buf
	lens     []int    // datagram length per slot
	seqs     []uint64
	repairT  []int64  // when each slot was last repaired
	repairTx []uint16 // the transmission number of that repair (multicast)
	next     uint64   // sequence of the next datagram
	tx       uint16   // transmission number of the next datagram to the group
	nextMsg  uint64   // number of the next message
	msgs     []rdmanet.Message
	msgSlot  []int // the window slot of each of msgs

	lastSend int64 // last data or heartbeat
	// startUntil ends the sender's start (starting): startSpan after
	// the conn was made.
	startUntil int64
	waiting    bool  // a write waits for the receivers' status (waitWindow)
	hbEvery    int64 // current heartbeat interval (doubles while idle)
	hbTimer    *time.Timer
	hbAt       atomic.Int64 // when hbTimer fires
	wrote      atomic.Int64 // lastSend of the last write, for heartbeatTimer
	hbBuf      [headerLen + hbPayload + trailerLen]byte
	ctrl       [1]rdmanet.Message
	lostBuf    [headerLen + trailerLen]byte

	receivers map[peerKey]*receiverState
	gsize     uint8         // gsizeCode(len(receivers)): advertised in data and heartbeats (feedback.go)
	wakeCh    chan struct{} // status arrived, deadline changed
	lastSweep int64

	repair repairCredit  // bounds repair bytes to a share of first sends
	seal   sealer        // Config.Key: the trailer of what the sender sends (auth.go)
	dl     writeDeadline // the user's write deadline on the underlying conn: deadline.go
}

// receiverState is what a sender knows of a receiver from its status.
type receiverState struct {
	pos   uint64 // first sequence it is missing
	limit uint64 // one past the last sequence it has room for
	heard int64
}

func (s *sender) init(c *Conn) {
	s.c = c
	s.wi = newRingIndex(c.cfg.Window)
	if win, err := c.conn.NewSendBuffer(c.cfg.Window * c.stride); err == nil {
		s.win = win
		s.buf = win.Bytes()[:c.cfg.Window*c.stride]
	} else {
		// Registered memory is pinned: past RLIMIT_MEMLOCK (or a
		// device's MR limit) the window is Go memory, and rdmanet
		// copies each send out of it, as before SendBuffers.
		s.buf = make([]byte, c.cfg.Window*c.stride)
		s.winErr = err
	}
	s.posted = make([]uint64, c.cfg.Window)
	s.lens = make([]int, c.cfg.Window)
	s.seqs = make([]uint64, c.cfg.Window)
	s.repairT = make([]int64, c.cfg.Window)
	s.repairTx = make([]uint16, c.cfg.Window)
	maxFrags := max((c.cfg.MaxMessage+c.frag-1)/c.frag, 64)
	s.msgs = make([]rdmanet.Message, maxFrags)
	s.msgSlot = make([]int, maxFrags)
	s.hbEvery = int64(c.cfg.HeartbeatInterval)
	s.startUntil = c.now() + int64(startSpan)
	s.hbTimer = time.AfterFunc(time.Hour, s.heartbeatTimer)
	s.hbTimer.Stop()
	s.receivers = make(map[peerKey]*receiverState)
	s.wakeCh = make(chan struct{}, 1)
	s.repair.init(c.cfg.RepairShare, repairBurst)
}

// stop keeps every later call off the window, which the underlying conn's
// Close unmaps; a write in progress finishes first.
func (s *sender) stop() {
	s.mu.Lock()
	s.dead = true
	s.mu.Unlock()
}

// sent records that the first n of msgs were posted: their slots may not
// change until the conn's sends reach what it has posted now.
func (s *sender) sent(n int) {
	if n == 0 {
		return
	}
	mark := s.c.conn.SendsPosted()
	for _, i := range s.msgSlot[:n] {
		s.posted[i] = mark
	}
}

// settled reports whether slot i's last send completed, polling the
// conn's send completions when the last count read does not say.
func (s *sender) settled(i int) bool {
	if s.posted[i] <= s.done {
		return true
	}
	s.done = s.c.conn.SendsDone()
	return s.posted[i] <= s.done
}

// reuse waits until slot i may be written: its last send completed.
func (s *sender) reuse(i int) error {
	if s.settled(i) {
		return nil
	}
	s.c.stats.windowWaits.Add(1)
	if err := s.c.conn.WaitSends(s.posted[i]); err != nil {
		return err
	}
	s.done = max(s.done, s.posted[i])
	return nil
}

func (s *sender) wake() {
	select {
	case s.wakeCh <- struct{}{}:
	default:
	}
}

func (s *sender) slot(seq uint64) []byte {
	i := int(s.wi.of(seq))
	return s.buf[i*s.c.stride : i*s.c.stride+s.c.mtu]
}

// startSpan is how long after it is made a sender marks its datagrams
// as sent in its start (starting).
const startSpan = time.Second

// starting reports whether a datagram that takes the sender up to end
// (one past its seq; for a heartbeat, next) is sent in the sender's
// start: in its first startSpan, and within its first window, so that
// all of it before end is still held. A receiver that has not heard the
// sender before starts it at seq 0 on such a datagram rather than at the
// datagram: were it listening when the sender started, it would
// otherwise skip, with no loss reported, what it lost of the sender's
// first datagrams and the heartbeats that announced them (a sender that
// writes at once after Listen sends its first datagram before its first
// heartbeat). One that joins in the sender's first second may get what
// the sender wrote before it joined.
func (s *sender) starting(end uint64, now int64) bool {
	return now < s.startUntil && end <= s.wi.n
}

// flags are the flags of the sender's data and heartbeats: its flow
// control, and the group size its receivers' NAK back-off scales with.
func (s *sender) flags() uint8 {
	f := s.gsize << gsizeShift
	if s.c.cfg.FlowControl == FlowMin {
		f |= flagFlowMin
	}
	if s.waiting {
		f |= flagWait
	}
	return f
}

// write cuts each message into datagrams, keeps them in the window and
// sends them, as many datagrams a post as s.msgs holds. It returns how
// many messages were written.
//
// A message is written once any of its datagrams was posted: it has
// sequence numbers the receivers know of, and what of it was not posted
// reaches them by repair. When a post fails part way, the messages none
// of whose datagrams was posted are taken back out of the window
// (unstage), so the count says exactly which the caller may write again
// without a receiver reading one twice; an error after every message was
// written is not returned (the next write meets it, with nothing taken).
func (s *sender) write(ms []rdmanet.Message) (int, error) {
	c := s.c
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return 0, net.ErrClosed
	}
	s.deadlineOn()
	defer s.deadlineOff()
	// A write past its deadline stages nothing: a message given a
	// sequence number is in the window and reaches the receivers by
	// repair, so it must not be reported as not written.
	if dl := c.writeDL.Load(); dl != 0 && time.Now().UnixNano() >= dl {
		return 0, os.ErrDeadlineExceeded
	}
	k, done := 0, 0 // datagrams staged in s.msgs; messages written
	staged := 0     // messages staged in s.msgs: ms[done:done+staged]
	// With FlowMin, how far the slowest receiver lets this write go:
	// looked at once a call (s.mu keeps status out meanwhile), again
	// only when a message would pass it.
	now := c.now()
	lim, limited := uint64(0), false
	if c.cfg.FlowControl == FlowMin {
		lim, limited = s.slowest(now)
	}
	flush := func() error {
		if k == 0 {
			return nil
		}
		var sent int
		var err error
		if c.postHook != nil {
			sent, err = c.postHook(s.msgs[:k])
		} else {
			sent, err = c.conn.WriteBatch(s.msgs[:k])
		}
		s.sent(sent)
		c.stats.datagramsSent.Add(uint64(sent))
		for _, w := range s.msgSlot[:sent] {
			s.repair.earn(s.lens[w])
		}
		written := staged
		if sent < k {
			written = s.unstage(ms[done:done+staged], sent, k)
		}
		bytes := 0
		for i := range ms[done : done+written] {
			bytes += len(ms[done+i].Buffer)
		}
		c.stats.messagesSent.Add(uint64(written))
		c.stats.bytesSent.Add(uint64(bytes))
		done += written
		k, staged = 0, 0
		return err
	}
	for i := range ms {
		b := ms[i].Buffer
		nfrag := max((len(b)+c.frag-1)/c.frag, 1)
		// A batch never holds one slot twice (a window smaller than
		// s.msgs would wrap inside it).
		if k+nfrag > len(s.msgs) || uint64(k+nfrag) > s.wi.n {
			if err := flush(); err != nil {
				return done, err
			}
		}
		if limited && s.next+uint64(nfrag) > lim {
			now = c.now()
			if lim, limited = s.slowest(now); limited && s.next+uint64(nfrag) > lim {
				// Waiting unlocks s.mu, and repairs use s.msgs.
				if err := flush(); err != nil {
					return done, err
				}
				if err := s.waitWindow(uint64(nfrag)); err != nil {
					return done, err
				}
				now = c.now()
				lim, limited = s.slowest(now)
			}
		}
		for i := range uint64(nfrag) {
			if err := s.reuse(int(s.wi.of(s.next + i))); err != nil {
				if ferr := flush(); ferr != nil {
					return done, ferr
				}
				return done, err
			}
		}
		h := header{kind: kindData, flags: s.flags(), nfrag: uint16(nfrag), session: c.session, msg: s.nextMsg}
		if s.starting(s.next+uint64(nfrag), now) {
			h.flags |= flagStart
		}
		for i := 0; i < nfrag; i++ {
			seq := s.next + uint64(i)
			w := int(s.wi.of(seq))
			d := s.slot(seq)
			h.frag, h.seq, h.tx = uint16(i), seq, s.tx
			s.tx++
			if c.sendHook != nil {
				c.sendHook(seq, false, now)
			}
			putHeader(d, &h)
			chunk := b[i*c.frag:]
			if len(chunk) > c.frag {
				chunk = chunk[:c.frag]
			}
			n := c.seal(&s.seal, d, headerLen+copy(d[headerLen:], chunk))
			s.lens[w], s.seqs[w], s.repairT[w] = n, seq, 0
			s.msgs[k] = rdmanet.Message{Buffer: d[:n], Addr: c.group}
			s.msgSlot[k] = w
			k++
		}
		s.next += uint64(nfrag)
		s.nextMsg++
		staged++
	}
	s.lastSend = now
	s.hbEvery = int64(c.cfg.HeartbeatInterval)
	s.wrote.Store(s.lastSend)
	if at := s.hbAt.Load(); at <= s.lastSend || at-s.lastSend > s.hbEvery {
		// Idle before: the timer had fired, or waits for a doubled
		// interval.
		s.armHeartbeat(s.lastSend+s.hbEvery, s.lastSend)
	}
	if err := flush(); err != nil && done < len(ms) {
		return done, err
	}
	return done, nil
}

// unstage takes back out of the window the messages of ms, staged in
// s.msgs[:k] in order, none of whose datagrams was posted: only the first
// sent were. Nobody has seen their sequence numbers (s.mu was held from
// staging to the post, and heartbeats and repairs take it), so the next
// message gets them again. It returns how many of ms were written.
func (s *sender) unstage(ms []rdmanet.Message, sent, k int) int {
	at, n := 0, 0
	for n < len(ms) && at < sent {
		at += max((len(ms[n].Buffer)+s.c.frag-1)/s.c.frag, 1)
		n++
	}
	s.next -= uint64(k - at)
	s.nextMsg -= uint64(len(ms) - n)
	return n
}

// waitWindow waits, with s.mu held on entry and return, while writing
// nfrag more datagrams would overwrite one the slowest live receiver has
// not got.
func (s *sender) waitWindow(nfrag uint64) error {
	c := s.c
	counted := false
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		lim, ok := s.slowest(c.now())
		if !ok || s.next+nfrag <= lim {
			return nil
		}
		if !counted {
			c.stats.fcWaits.Add(1)
			counted = true
		}
		var timeout <-chan time.Time
		if dl := c.writeDL.Load(); dl != 0 {
			d := time.Duration(dl - time.Now().UnixNano())
			if d <= 0 {
				return os.ErrDeadlineExceeded
			}
			if t == nil {
				t = time.NewTimer(d)
			} else {
				t.Reset(d)
			}
			timeout = t.C
		}
		// Wake at the latest when the slowest would time out.
		rt := time.NewTimer(c.cfg.ReceiverTimeout)
		s.deadlineOff() // repairs and heartbeats go meanwhile
		s.waitHeartbeats(true)
		s.mu.Unlock()
		select {
		case <-s.wakeCh:
		case <-timeout:
		case <-rt.C:
		case <-c.closed:
		}
		rt.Stop()
		s.mu.Lock()
		s.waitHeartbeats(false)
		s.deadlineOn()
		if c.closing.Load() {
			return net.ErrClosed
		}
	}
}

// waitHeartbeats marks the heartbeats sent while a write waits
// (flagWait): they ask the receivers for their status, which otherwise
// comes as their position and room move on by a quarter of RecvWindow
// (and to stay known), so that a report lost on the way is sent again.
// While a write waits they do not back off past 4 StatusIntervals, and
// the first comes within HeartbeatInterval of the wait's start.
func (s *sender) waitHeartbeats(on bool) {
	s.waiting = on
	if !on {
		return
	}
	c := s.c
	s.hbEvery = min(s.hbEvery, int64(c.cfg.HeartbeatInterval))
	if now, at := c.now(), s.lastSend+s.hbEvery; at < s.hbAt.Load() || s.hbAt.Load() <= now {
		s.armHeartbeat(max(at, now), now)
	}
}

// slowest returns how far the sender may write: one past the last
// sequence that every live receiver can still be repaired (its position
// plus the window) and has room for.
func (s *sender) slowest(now int64) (uint64, bool) {
	var lim uint64
	ok := false
	for _, r := range s.receivers {
		if now-r.heard > int64(s.c.cfg.ReceiverTimeout) {
			continue
		}
		end := min(r.pos+s.wi.n, r.limit)
		if !ok || end < lim {
			lim, ok = end, true
		}
	}
	return lim, ok
}

// low returns the first sequence in the window that starts a message, and
// that message's number; (next, nextMsg) when the window is empty.
func (s *sender) low() (uint64, uint64) {
	lo := uint64(0)
	if s.next > s.wi.n {
		lo = s.next - s.wi.n
	}
	for seq := lo; seq < s.next; seq++ {
		// Slots hold data datagrams as sent (keyed: flagKeyed set, the
		// trailer after): the fragment index and msg are read in place.
		if d := s.slot(seq); s.lens[s.wi.of(seq)] >= headerLen && fragOf(d) == 0 {
			return seq, msgOf(d)
		}
	}
	return s.next, s.nextMsg
}

// touch records that a receiver was heard; with pos, where it is.
func (s *sender) touch(from rdmanet.Addr, session uint32, now int64, pos, limit uint64, hasPos bool) {
	key := peerKey{addr: from, session: session}
	r := s.receivers[key]
	if r == nil {
		if !hasPos || len(s.receivers) >= 4*s.c.cfg.MaxSenders {
			return
		}
		r = &receiverState{}
		s.receivers[key] = r
		s.gsize = gsizeCode(len(s.receivers))
	}
	r.heard = now
	if hasPos {
		r.pos, r.limit = max(r.pos, pos), max(r.limit, limit)
	}
}

// heard keeps a receiver the sender knows alive: its heartbeat came at
// now (a member heartbeats from Listen on). A member not known by its
// status is not made a receiver (touch without a position): a send-only
// conn heartbeats too.
func (s *sender) heard(from rdmanet.Addr, session uint32, now int64) {
	s.mu.Lock()
	s.touch(from, session, now, 0, 0, false)
	s.mu.Unlock()
}

// status records a receiver's position.
func (s *sender) status(from rdmanet.Addr, h *header, limit uint64) {
	s.mu.Lock()
	s.touch(from, h.session, s.c.now(), h.seq, limit, true)
	s.mu.Unlock()
	s.wake()
}

// heartbeat sends the sender's position to the group.
func (s *sender) heartbeat(fin bool) {
	c := s.c
	if s.dead {
		return
	}
	lowSeq, lowMsg := s.low()
	h := header{kind: kindHeartbeat, flags: s.flags(), session: c.session, seq: s.next, msg: s.nextMsg, tx: s.tx}
	if s.starting(s.next, c.now()) {
		h.frag = hbStart
	}
	s.tx++
	if fin {
		h.flags |= flagFin
	}
	putHeader(s.hbBuf[:], &h)
	putHeartbeat(s.hbBuf[headerLen:], lowSeq, lowMsg)
	s.ctrl[0] = rdmanet.Message{Buffer: s.hbBuf[:c.seal(&s.seal, s.hbBuf[:], headerLen+hbPayload)], Addr: c.group}
	if _, err := c.conn.WriteBatch(s.ctrl[:]); err == nil {
		c.stats.heartbeats.Add(1)
	}
}

// armHeartbeat sets the heartbeat timer to fire at at.
//
// The heartbeat has a timer of its own, not the timer loop's next
// deadline: when it fires and the sender wrote meanwhile, it sets itself
// again for an interval after that write (heartbeatTimer) and the loop
// sleeps on. Woken for the heartbeat's deadline, the loop found that
// data went out meanwhile once an interval (at 50,000 msgs/s with the
// 100 µs default, 10,000 wake-ups a second beside the receivers, whose
// readers waited for the processor, and a fifth of them waiting for the
// writer's lock). Writes do not move the timer (a Reset that brings a
// timer nearer wakes the netpoller: once per batch cost the batch rate
// 4-10%); only the first write after an idle spell does.
func (s *sender) armHeartbeat(at, now int64) {
	s.hbAt.Store(at)
	s.hbTimer.Reset(time.Duration(at - now))
}

// heartbeatTimer runs when the heartbeat timer fires: it wakes the timer
// loop, which sends the heartbeat, unless a write came after the timer
// was set; then it fires again an interval after that write.
func (s *sender) heartbeatTimer() {
	c := s.c
	now := c.now()
	if at := s.wrote.Load() + int64(c.cfg.HeartbeatInterval); at > now {
		s.hbAt.Store(at)
		s.hbTimer.Reset(time.Duration(at - now))
		return
	}
	c.kickTimers()
}

// tick sends a heartbeat when the sender has been idle, forgets silent
// receivers, and returns when it next has something to do.
func (s *sender) tick(now int64) int64 {
	c := s.c
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return now + int64(c.cfg.HeartbeatMax)
	}
	// Heartbeats start at Listen, whatever the flow control: receivers
	// learn of the sender before it writes, start it at seq 0 (so that
	// the loss of its first datagram is a gap they repair) and report
	// their status to it (Receivers).
	next := now + int64(c.cfg.HeartbeatMax)
	if now-s.lastSend >= s.hbEvery {
		s.heartbeat(false)
		s.lastSend = now
		limit := int64(c.cfg.HeartbeatMax)
		if s.waiting {
			limit = max(int64(c.cfg.HeartbeatInterval), min(limit, 4*int64(c.cfg.StatusInterval)))
		}
		s.hbEvery = min(2*s.hbEvery, limit)
	}
	if at, armed := s.lastSend+s.hbEvery, s.hbAt.Load(); at < armed || armed <= now {
		s.armHeartbeat(at, now)
	}
	if now-s.lastSweep > int64(c.cfg.ReceiverTimeout) {
		s.lastSweep = now
		for k, r := range s.receivers {
			if now-r.heard > int64(c.cfg.ReceiverTimeout) {
				delete(s.receivers, k)
				c.stats.receiversTimedOut.Add(1)
				s.wake()
			}
		}
		s.gsize = gsizeCode(len(s.receivers))
	}
	return next
}

// linger runs at Close: while some live receiver lacks what this conn
// sent, it keeps announcing the end (heartbeats with the fin flag, which
// ask receivers for their status) and serving repairs, for at most
// Config.Linger. A receiver the sender has not heard from yet cannot be
// waited for: with none known, it lingers four status intervals (at least
// 5 ms) for one to speak up.
func (s *sender) linger() {
	c := s.c
	s.mu.Lock()
	sent := s.next > 0
	s.mu.Unlock()
	if !sent || c.cfg.Linger < 0 {
		return
	}
	start := c.now()
	deadline := start + int64(c.cfg.Linger)
	// Receivers report every StatusInterval (and at once to a fin): when
	// none is known, wait a few intervals for one to speak up.
	unknownWait := start + min(int64(c.cfg.Linger), max(4*int64(c.cfg.StatusInterval), int64(5*time.Millisecond)))
	every := 100 * time.Microsecond
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		s.mu.Lock()
		s.heartbeat(true)
		done, known := true, len(s.receivers) > 0
		now := c.now()
		for _, r := range s.receivers {
			if now-r.heard <= int64(c.cfg.ReceiverTimeout) && r.pos < s.next {
				done = false
			}
		}
		s.mu.Unlock()
		if (done && (known || now >= unknownWait)) || now >= deadline {
			return
		}
		t.Reset(every)
		select {
		case <-t.C:
		case <-s.wakeCh:
		}
		if every < 5*time.Millisecond {
			every *= 2
		}
	}
}
