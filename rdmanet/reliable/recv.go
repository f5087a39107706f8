package reliable

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// peerKey names a sender (or, on the sending side, a receiver): its QP and
// its session, so that a restarted program on the same QP is a new peer.
type peerKey struct {
	addr    rdmanet.Addr
	session uint32
}

// peer is a receiver's state for one sender: a ring of datagram slots
// holding what arrived and is not yet read, in sequence order.
//
//	next     first datagram not yet read (starts a message)
//	contig   first datagram missing at or after next
//	high     one past the highest datagram known to exist
//
// A slot is valid for seq when seqs[slot] == seq and lens[slot] > 0, so
// nothing is ever cleared: moving next past a slot retires it.
//
// The ring grows on demand (grow): there is none until a datagram must
// be kept (the direct path hands a message to the reader without one),
// then it doubles from minRing slots, up to RecvWindow, as datagrams
// further from next arrive. Its ri.n slots hold any datagrams in
// [next, next+ri.n) without two sharing a slot.
type peer struct {
	key  peerKey
	addr *rdmanet.Addr // handed out by ReadFrom: allocated once

	ring   []byte
	lens   []int32
	seqs   []uint64
	ri     ringIndex // slot of a sequence in ring, lens and seqs; ri.n == 0: no ring yet
	keptAt int64     // when a datagram was last kept in the ring (tick frees an idle one)

	// A message with more fragments than MaxMessage allows takes
	// [longStart, longEnd) (longEnd 0: none): it is not kept, and is
	// reported lost when next reaches it.
	longStart, longEnd, longMsg uint64
	// slack: how much further than the seq the message number may have
	// moved since next, past a message too long (which may have been
	// forged: what it took may have been many of the sender's
	// messages); 0 once a message is read.
	slack uint64

	next, contig, high uint64
	nextMsg            uint64
	lost               uint64 // messages lost, to report before the next one
	skipTo, skipMsg    uint64 // the sender no longer holds what is before skipTo
	joining            bool   // FromWindowStart: where to start is not known yet
	placed             bool   // next is set
	queued, fin        bool
	flowMin            bool
	tx                 uint16 // the latest transmission number heard from the sender
	gsize              uint8  // the group-size code the sender advertised last (feedback.go)

	heard  int64
	nak    nakTimer // when to NAK the gaps (feedback.go)
	srtt   int64    // smoothed round trip (RFC 6298)
	rttvar int64    // its mean deviation; 0 until the first sample

	statusPos uint64 // contig, as last reported
	statusLim uint64 // next + RecvWindow, as last reported
	statusAt  int64
}

type receiver struct {
	c       *Conn
	mu      sync.Mutex
	peers   map[peerKey]*peer
	rw      uint64 // RecvWindow: the most datagrams a peer's ring holds
	maxFrag uint64 // the most fragments a message of MaxMessage bytes takes

	// memos remembers where to start senders not tracked now, at most
	// memoMax of them (the least recently touched goes first): one
	// evicted while idle resumes at its next; one refused (MaxSenders
	// tracked, none idle) starts at its first datagram refused, so what
	// it sent meanwhile is repaired or reported lost, not skipped.
	memos   map[peerKey]memo
	memoMax int
	ready   []*peer // ring of peers with a message (or loss) to read
	rHead   int
	rLen    int
	notify  chan struct{}

	// waiting: the reader found nothing and may park on notify; a push
	// then sets signal, and the receive loop wakes the reader once after
	// the batch of datagrams it handled (flush), not once per message.
	waiting bool
	signal  atomic.Bool

	// direct is the buffer of a ReadFrom that reads the underlying conn
	// itself (rx.go: readInline), for the one datagram it reads: data
	// copies the datagram's message straight into it when it is its
	// sender's next message, whole, and nothing else is ready to read (no
	// copy into the receive window and out again). x.io keeps direct to
	// that read: the receive loop handles datagrams only while the reader
	// does not. directOK, directN and directFrom say what was delivered.
	direct     []byte
	directOK   bool
	directN    int
	directFrom *rdmanet.Addr

	last     *peer       // the peer of the last datagram: most are from the same sender
	pending  int         // peers whose NAK timer is not idle
	held     atomic.Bool // a NAK due waits for the input to be read (tick)
	ctrl     [1]rdmanet.Message
	ctrlBuf  [headerLen + statusPayload + trailerLen]byte
	nakBuf   []byte // an MTU: NAKs are padded (wire.go: nakPays)
	seal     sealer // Config.Key: the trailer of NAKs and status (auth.go)
	lastTick int64
	rng      *rand.Rand
}

// memo is where to start a sender that is not tracked now.
type memo struct {
	seq, msg uint64 // the first datagram to take, and its message
	at       int64  // last touched
	resume   bool   // evicted after it was tracked (else: refused)
}

func (r *receiver) init(c *Conn) {
	r.c = c
	r.peers = make(map[peerKey]*peer)
	r.rw = uint64(c.cfg.RecvWindow)
	r.maxFrag = uint64(max(1, (c.cfg.MaxMessage+c.frag-1)/c.frag))
	r.memos = make(map[peerKey]memo)
	r.memoMax = max(64, 4*c.cfg.MaxSenders)
	r.ready = make([]*peer, c.cfg.MaxSenders)
	r.notify = make(chan struct{}, 1)
	r.nakBuf = make([]byte, c.mtu)
	r.rng = rand.New(rand.NewPCG(uint64(c.session), uint64(time.Now().UnixNano())))
}

func (r *receiver) wake() {
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

func (r *receiver) maxRTT() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := int64(r.c.cfg.InitialRTT)
	if len(r.peers) > 0 {
		m = 0
	}
	for _, p := range r.peers {
		if p.srtt > m {
			m = p.srtt
		}
	}
	return time.Duration(m)
}

// windows returns how many senders r tracks and what their rings take.
func (r *receiver) windows() (senders int, bytes uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.peers {
		bytes += uint64(cap(p.ring) + 4*cap(p.lens) + 8*cap(p.seqs))
	}
	return len(r.peers), bytes
}

func (r *receiver) nakPending() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pending > 0
}

// peer returns the state for a sender, making it when the sender is new
// and there is room: MaxSenders tracked, it evicts an idle one. When
// none can be, the datagram, which starts at seq in message msg, is
// refused (counted) and the sender remembered, to start there once
// admitted.
func (r *receiver) peer(from rdmanet.Addr, session uint32, now int64, seq, msg uint64) *peer {
	key := peerKey{addr: from, session: session}
	if p := r.last; p != nil && p.key == key {
		p.heard = now
		return p
	}
	if p := r.peers[key]; p != nil {
		p.heard = now
		r.last = p
		return p
	}
	c := r.c
	if len(r.peers) >= c.cfg.MaxSenders && !r.evict(now) {
		c.stats.sendersRefused.Add(1)
		if m, ok := r.memos[key]; ok {
			m.at = now // keep where it was first refused (or evicted)
			r.memos[key] = m
		} else {
			r.remember(key, memo{seq: seq, msg: msg, at: now})
		}
		return nil
	}
	a := from
	p := &peer{
		key:   key,
		addr:  &a,
		heard: now,
		srtt:  int64(c.cfg.InitialRTT),
	}
	r.peers[key] = p
	return p
}

// evict forgets the idle sender heard least recently, to make room for a
// new one, and reports whether there was one: idle is nothing to read or
// to report, nothing kept in its ring, no NAK pending. It is remembered
// (memos) to resume where it was when heard again.
func (r *receiver) evict(now int64) bool {
	var v *peer
	for _, p := range r.peers {
		if p.idle() && (v == nil || p.heard < v.heard) {
			v = p
		}
	}
	if v == nil {
		return false
	}
	r.remember(v.key, memo{seq: v.next, msg: v.nextMsg, at: now, resume: true})
	delete(r.peers, v.key)
	if r.last == v {
		r.last = nil
	}
	r.c.stats.sendersEvicted.Add(1)
	return true
}

// idle reports whether p may be evicted: it holds nothing not yet read,
// nothing to report and no gap (nothing known past next), and waits for
// no NAK's answer.
func (p *peer) idle() bool {
	return p.placed && !p.queued && !p.joining && p.lost == 0 && p.nak.state == nakIdle &&
		p.next >= p.high && p.longEnd == 0
}

// remember records m for key, making room when there are memoMax by
// forgetting a memo: one of a sender only ever refused first (never
// tracked: most likely a non-member's), else the one of a sender once
// tracked; the least recently touched of the kind. A forgotten sender
// heard again starts where it is heard: what it sent while not tracked is
// neither repaired nor reported, so each is counted (SendersForgotten).
func (r *receiver) remember(key peerKey, m memo) {
	if _, ok := r.memos[key]; !ok && len(r.memos) >= r.memoMax {
		var old peerKey
		var oldest memo
		found := false
		for k, o := range r.memos {
			if !found || forgetFirst(o, oldest) {
				old, oldest, found = k, o, true
			}
		}
		delete(r.memos, old)
		r.c.stats.sendersForgotten.Add(1)
	}
	r.memos[key] = m
}

// forgetFirst reports whether memo a goes before memo b when one must be
// forgotten: a refused sender's before a once-tracked one's, then the
// least recently touched.
func forgetFirst(a, b memo) bool {
	if a.resume != b.resume {
		return !a.resume
	}
	return a.at < b.at
}

// start places a new peer: at the message of the first datagram heard,
// or, with FromWindowStart, nowhere yet (a NAK from 0 finds where the
// sender's window starts). A sender remembered starts where the memo
// says: an evicted one where it was, a refused one at its first datagram
// refused (or, with FromWindowStart, at the window start as any other).
func (r *receiver) start(p *peer, seq, msg uint64, now int64) {
	m, known := r.memos[p.key]
	if known {
		delete(r.memos, p.key)
	}
	switch {
	case known && m.resume:
		seq, msg = m.seq, m.msg
	case r.c.cfg.FromWindowStart:
		seq, msg = 0, 0
		p.joining = true
	case known && m.seq < seq:
		seq, msg = m.seq, m.msg
	}
	p.next, p.contig, p.high, p.nextMsg = seq, seq, seq, msg
	p.placed = true
	// Tell the sender at once that this receiver exists (FlowMin and
	// Close wait for the receivers they know).
	r.sendStatus(p, now)
}

// hearTx notes a transmission number heard from the sender to the group
// (data, repairs, heartbeats): NAKs echo the latest, so that the sender
// tells a NAK sent before its repair could arrive from one sent after the
// repair was lost. The path may reorder: serial order, not arrival, wins.
func (p *peer) hearTx(tx uint16) {
	if int16(tx-p.tx) > 0 {
		p.tx = tx
	}
}

func (p *peer) valid(seq uint64) bool {
	if p.ri.n == 0 {
		return false
	}
	i := p.ri.of(seq)
	return p.lens[i] > 0 && p.seqs[i] == seq
}

// have reports whether seq needs no NAK: it is kept, or part of a
// message too long to keep (reported lost instead).
func (p *peer) have(seq uint64) bool {
	return p.valid(seq) || (seq >= p.longStart && seq < p.longEnd)
}

// minRing is the size of a peer's first ring, in datagrams.
const minRing = 8

// grow makes p's ring hold seq (next <= seq < next+RecvWindow): it makes
// the ring on first need and doubles it, moving the datagrams it holds
// to their new slots, until seq fits.
func (r *receiver) grow(p *peer, seq uint64) {
	need := seq - p.next + 1
	if need <= p.ri.n {
		return
	}
	n := max(p.ri.n, minRing)
	for n < need {
		n *= 2
	}
	n = min(n, r.rw)
	stride := r.c.stride
	ring := make([]byte, int(n)*stride)
	lens := make([]int32, n)
	seqs := make([]uint64, n)
	ri := newRingIndex(int(n))
	for i := range p.lens {
		if s := p.seqs[i]; p.lens[i] > 0 && s >= p.next {
			j := ri.of(s)
			copy(ring[int(j)*stride:], p.ring[i*stride:i*stride+int(p.lens[i])])
			lens[j], seqs[j] = p.lens[i], s
		}
	}
	p.ring, p.lens, p.seqs, p.ri = ring, lens, seqs, ri
}

// shrink frees p's ring when it holds nothing.
func (p *peer) shrink() {
	if p.next >= p.high {
		p.ring, p.lens, p.seqs, p.ri = nil, nil, nil, ringIndex{}
	}
}

// bytes is what p costs in memory: its state and its ring.
func (p *peer) bytes() int {
	return int(unsafe.Sizeof(*p)+unsafe.Sizeof(*p.addr)) + cap(p.ring) + 4*cap(p.lens) + 8*cap(p.seqs)
}

// plausible reports whether a datagram that starts at seq in message msg
// fits what p knows of the sender: every message takes a datagram at
// least, so from next (which starts message nextMsg) the message number
// grows no faster than the seq. A datagram at or past next that starts
// before it does not fit either (next starts a message).
func (p *peer) plausible(seq, msg uint64) bool {
	return seq >= p.next && msg >= p.nextMsg && msg-p.nextMsg <= seq-p.next+p.slack
}

func (p *peer) slot(seq uint64, stride int) []byte {
	i := int(p.ri.of(seq))
	return p.ring[i*stride : i*stride+int(p.lens[i])]
}

// headComplete reports whether the message at next is all there.
func (p *peer) headComplete(stride int) bool {
	if !p.valid(p.next) {
		return false
	}
	d := p.slot(p.next, stride)
	return p.contig >= p.next+uint64(nfragOf(d))
}

// data takes a data datagram (the whole of b, header included).
func (r *receiver) data(from rdmanet.Addr, h *header, b []byte, now int64) {
	c := r.c
	r.mu.Lock()
	defer r.mu.Unlock()
	seq := h.seq
	first := seq - uint64(h.frag) // decode checked frag <= seq
	p := r.peer(from, h.session, now, first, h.msg)
	if p == nil {
		return
	}
	if !p.placed {
		p.tx = h.tx
		r.start(p, first, h.msg, now)
	}
	if seq >= p.next && !p.plausible(first, h.msg) {
		c.stats.implausible.Add(1)
		return
	}
	p.hearTx(h.tx)
	p.flowMin = h.flags&flagFlowMin != 0
	p.gsize = h.flags >> gsizeShift
	if uint64(h.nfrag) > r.maxFrag {
		// Longer than MaxMessage: not kept, and reported lost at its
		// place (one such message at a time; a later one's datagrams
		// are repaired again once this one is past).
		c.stats.tooLong.Add(1)
		if p.longEnd == 0 && seq >= p.next {
			p.longStart, p.longEnd, p.longMsg = first, first+uint64(h.nfrag), h.msg
			p.high = max(p.high, p.longEnd)
			r.settle(p, now)
			r.statusDue(p, now)
		}
		return
	}
	if seq >= p.longStart && seq < p.longEnd {
		c.stats.tooLong.Add(1) // its place is taken by a message too long
		return
	}
	if seq < p.next || p.valid(seq) {
		c.stats.duplicates.Add(1)
		return
	}
	if seq >= p.high {
		if c.gapHook != nil && seq > p.high {
			c.gapHook(p.key, p.high, seq, now)
		}
		p.high = seq + 1
	}
	if seq >= p.next+r.rw {
		c.stats.overruns.Add(1)
		r.nakUpdate(p, now)
		return
	}
	if r.direct != nil && h.nfrag == 1 && seq == p.next && p.contig == seq && h.msg == p.nextMsg &&
		h.flags&flagRepair == 0 && !p.queued && p.lost == 0 && r.rLen == 0 {
		r.deliverDirect(p, b[headerLen:], now)
		return
	}
	if seq-p.next >= p.ri.n {
		r.grow(p, seq)
	}
	p.keptAt = now
	i := p.ri.of(seq)
	copy(p.ring[int(i)*c.stride:], b)
	p.lens[i], p.seqs[i] = int32(len(b)), seq
	if h.flags&flagRepair != 0 {
		c.stats.recovered.Add(1)
		// One sample per round: the time from its NAK to the repair of
		// the first datagram it asked for, when it was sent once
		// (feedback.go: repaired).
		if sample, ok := p.nak.repaired(now, seq); ok {
			p.srtt, p.rttvar = rttSample(p.srtt, p.rttvar, sample)
		}
	}
	r.settle(p, now)
	r.statusDue(p, now)
}

// deliverDirect hands the message pl, p's next, to the reader's direct
// buffer, as take and deliver would from the window; r.mu is held.
func (r *receiver) deliverDirect(p *peer, pl []byte, now int64) {
	c := r.c
	n := copy(r.direct, pl)
	r.direct, r.directOK, r.directN, r.directFrom = nil, true, n, p.addr
	r.waiting = false
	p.next++
	p.contig = p.next
	p.nextMsg++
	p.slack = 0
	p.joining = false
	c.stats.direct.Add(1)
	r.delivered(p, n, n < len(pl), now)
}

// delivered counts a message handed to the reader (from the window or
// directly) and settles its sender's window; r.mu is held.
func (r *receiver) delivered(p *peer, n int, truncated bool, now int64) {
	c := r.c
	if truncated {
		c.stats.truncated.Add(1)
	}
	c.stats.messagesReceived.Add(1)
	c.stats.bytesReceived.Add(uint64(n))
	r.settle(p, now)
	r.statusDue(p, now)
}

// heartbeat takes a sender's position: what it sent up to, and where its
// window starts.
func (r *receiver) heartbeat(from rdmanet.Addr, h *header, pl []byte) {
	now := r.c.now()
	lowSeq, lowMsg := parseHeartbeat(pl)
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.peer(from, h.session, now, h.seq, h.msg)
	if p == nil {
		return
	}
	if !p.placed {
		p.tx = h.tx
		r.start(p, h.seq, h.msg, now)
	}
	// A heartbeat sent before a "lost" answer moved next may arrive
	// after it (the answer comes by unicast): a position before next
	// says nothing, and a window start before next, nothing either.
	if (h.seq >= p.next && !p.plausible(h.seq, h.msg)) || lowSeq > h.seq || lowMsg > h.msg ||
		(lowSeq >= p.next && !p.plausible(lowSeq, lowMsg)) {
		r.c.stats.implausible.Add(1)
		return
	}
	p.hearTx(h.tx)
	p.flowMin = h.flags&flagFlowMin != 0
	p.gsize = h.flags >> gsizeShift
	if h.seq > p.high {
		if c := r.c; c.gapHook != nil {
			c.gapHook(p.key, p.high, h.seq, now)
		}
		p.high = h.seq
	}
	r.window(p, lowSeq, lowMsg)
	r.settle(p, now)
	if h.flags&flagFin != 0 {
		p.fin = true
		r.sendStatus(p, now)
	}
}

// lost takes a sender's answer to a NAK for what it no longer holds.
func (r *receiver) lost(from rdmanet.Addr, h *header) {
	now := r.c.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.peers[peerKey{addr: from, session: h.session}]
	if p == nil || p.nak.tries == 0 {
		// Not from a sender tracked, or answering no NAK of ours.
		r.c.stats.unsolicited.Add(1)
		return
	}
	if h.seq >= p.next && !p.plausible(h.seq, h.msg) {
		r.c.stats.implausible.Add(1)
		return
	}
	p.heard = now
	r.window(p, h.seq, h.msg)
	r.settle(p, now)
}

// window notes where the sender's window starts: what is missing before
// it is lost. It does not move high: a "lost" notice comes by unicast and
// can overtake the group's datagrams still queued for this receiver, so
// it condemns only gaps the receiver knows of (below high, which data and
// heartbeats, in order on the group's path, move).
func (r *receiver) window(p *peer, lowSeq, lowMsg uint64) {
	if lowSeq > p.skipTo {
		p.skipTo, p.skipMsg = lowSeq, lowMsg
	}
}

// settle moves contig over what arrived, gives up on what left the
// sender's window, queues the peer for reading, and schedules a NAK for
// what is still missing.
func (r *receiver) settle(p *peer, now int64) {
	stride := r.c.stride
	p.advance()
	for {
		if p.longEnd != 0 && p.next >= p.longStart {
			p.skipLong()
			continue
		}
		if !(p.skipTo > p.contig && p.contig < p.high && !p.headComplete(stride)) {
			break
		}
		// The gap at contig cannot be repaired: resume at the first
		// message held after it, or where the window starts.
		to, msg := p.skipTo, p.skipMsg
		for seq, end := p.contig+1, min(p.skipTo, p.next+r.rw); seq < end; seq++ {
			if p.valid(seq) {
				if d := p.slot(seq, stride); fragOf(d) == 0 {
					to, msg = seq, msgOf(d)
					break
				}
			}
		}
		if !p.joining && msg > p.nextMsg {
			p.lost = satAdd(p.lost, msg-p.nextMsg)
		}
		p.joining = false
		p.next, p.nextMsg = to, msg
		if p.contig < p.next {
			p.contig = p.next
		}
		p.advance()
	}
	if !p.joining && p.headComplete(stride) {
		// Messages skipped at the head (a message too long ended where
		// its sender's next one is numbered further on): report them
		// before the message, at their place.
		if m := msgOf(p.slot(p.next, stride)); m > p.nextMsg {
			p.lost, p.nextMsg = satAdd(p.lost, m-p.nextMsg), m
		}
	}
	if !p.queued && (p.lost > 0 || p.headComplete(stride)) {
		r.push(p)
	}
	if p.contig < p.high || p.nak.state != nakIdle {
		r.nakUpdate(p, now)
	}
}

// advance moves contig over what arrived (and over a message too long
// to keep).
func (p *peer) advance() {
	for p.contig < p.high {
		switch {
		case p.valid(p.contig):
			p.contig++
		case p.contig >= p.longStart && p.contig < p.longEnd:
			p.contig = p.longEnd
		default:
			return
		}
	}
}

// skipLong moves next past the message too long to keep, which it has
// reached, and reports it lost.
func (p *peer) skipLong() {
	if p.next == p.longStart {
		n := uint64(1)
		if !p.joining && p.longMsg > p.nextMsg {
			n += p.longMsg - p.nextMsg
		}
		p.lost = satAdd(p.lost, n)
		p.joining = false
		p.next, p.nextMsg = p.longEnd, p.longMsg+1
		p.slack = p.longEnd - p.longStart - 1
	} else if p.next < p.longEnd { // a window start inside it (forged)
		p.next, p.nextMsg = p.longEnd, max(p.nextMsg, p.longMsg+1)
	}
	p.longStart, p.longEnd, p.longMsg = 0, 0, 0
	if p.contig < p.next {
		p.contig = p.next
	}
	p.advance()
}

// satAdd is a+b, or the largest uint64 where that wraps: counts of
// messages lost come from senders' numbers and must not wrap.
func satAdd(a, b uint64) uint64 {
	if s := a + b; s >= a {
		return s
	}
	return ^uint64(0)
}

func (r *receiver) push(p *peer) {
	r.ready[(r.rHead+r.rLen)%len(r.ready)] = p
	r.rLen++
	p.queued = true
	if r.waiting {
		r.waiting = false
		r.signal.Store(true)
	}
}

// drained: the conn's input was read dry; a NAK held for it goes now
// (the timer loop looks again).
func (r *receiver) drained() {
	if r.held.Load() {
		r.c.kickTimers()
	}
}

// inputRecheck is how soon a NAK held for unread input looks again when
// no drained comes first (the reader reads one datagram at a time).
const inputRecheck = int64(time.Millisecond)

// holdMax is how long past due a NAK may be held for unread input: the
// back-off bound, at least maxRTO. A receiver that never reads its input
// dry still asks, that much later.
func holdMax(b *backoff) int64 {
	return max(backoffBound(b.g, b.srtt, b.fixed), int64(maxRTO))
}

// flush wakes the reader if a message became ready for it while it
// waited. The receive loop calls it after each batch it handled.
func (r *receiver) flush() {
	if r.signal.Load() && r.signal.Swap(false) {
		r.wake()
	}
}

func (r *receiver) pop() *peer {
	p := r.ready[r.rHead]
	r.ready[r.rHead] = nil
	r.rHead = (r.rHead + 1) % len(r.ready)
	r.rLen--
	p.queued = false
	return p
}

// Bounds of the round-trip estimate and the NAK retry timeout.
const (
	minRTT = 5 * time.Microsecond
	minRTO = 50 * time.Microsecond
	maxRTO = 10 * time.Millisecond
)

// backoff is what the peer's NAK delays depend on (feedback.go).
func (r *receiver) backoff(p *peer) backoff {
	return backoff{g: p.gsize, srtt: p.srtt, rttvar: p.rttvar, fixed: int64(r.c.cfg.NAKDelay), rng: r.rng}
}

// nakUpdate runs the peer's NAK timer over what is missing now
// (feedback.go): a gap starts a round after a random back-off
// (truncated exponential, scaled by the sender's group size: the first
// receiver's NAK brings the multicast repair that cancels the others'),
// and a round whose gaps are all filled ends, whoever asked for the
// repair. r.mu is held.
func (r *receiver) nakUpdate(p *peer, now int64) {
	c := r.c
	b := r.backoff(p)
	was := p.nak.state != nakIdle
	moved := false
	if was {
		asked := p.nak.tries > 0
		if took, done := p.nak.progress(now, p.contig, p.high, &b); done {
			moved = true
			c.stats.gapsFilled.Add(1)
			c.stats.repairDelaySum.Add(uint64(took))
			for m := c.stats.repairDelayMax.Load(); uint64(took) > m && !c.stats.repairDelayMax.CompareAndSwap(m, uint64(took)); m = c.stats.repairDelayMax.Load() {
			}
			if !asked {
				p.srtt = rttUnasked(p.srtt, p.rttvar, took, int64(c.cfg.InitialRTT))
			}
		}
	}
	if p.contig < p.high && p.nak.gap(now, p.high, &b) {
		moved = true
	}
	is := p.nak.state != nakIdle
	switch {
	case is && !was:
		r.pending++
	case !is && was:
		r.pending--
	}
	if is && moved {
		c.kickTimers() // a round started: its due is new
	}
}

// sendNAKs asks the sender for each missing run of the round (at most 8
// NAKs a round) and arms the retry (feedback.go: retryDelay). Gaps seen
// after the round started wait for their own round and back-off: asked
// for with a retry, they were asked for by every receiver that retried
// (16 receivers on a loaded machine sent 70 NAKs a loss so).
func (r *receiver) sendNAKs(p *peer, now int64) {
	end := min(p.high, p.next+r.rw, p.nak.end)
	runs := 0
	first := uint64(0)
	for seq := p.contig; seq < end && runs < 8; {
		if p.have(seq) {
			seq++
			continue
		}
		start := seq
		for seq < end && !p.have(seq) && seq-start < nakPays {
			seq++ // a NAK of up to an MTU pays for nakPays datagrams
		}
		r.sendNAK(p, start, seq-start)
		if runs == 0 {
			first = start
		}
		runs++
	}
	b := r.backoff(p)
	p.nak.fired(now, runs > 0, first, p.tx, &b)
	if runs == 0 {
		r.pending--
	}
}

func (r *receiver) sendNAK(p *peer, seq, count uint64) {
	c := r.c
	h := header{kind: kindNAK, session: c.session, seq: seq, tx: p.tx}
	putHeader(r.ctrlBuf[:], &h)
	putNAK(r.ctrlBuf[headerLen:], p.key.session, uint32(count), uint32(min(p.srtt, int64(maxRTO))))
	// Padded to pay for what it asks (wire.go: nakPays).
	b := r.nakBuf
	n := max(nakLen(count, c.mtu)-c.cfg.trailer(), headerLen+nakPayload)
	copy(b, r.ctrlBuf[:headerLen+nakPayload])
	clear(b[headerLen+nakPayload : n])
	r.ctrl[0] = rdmanet.Message{Buffer: b[:c.seal(&r.seal, b, n)], Addr: p.key.addr}
	if _, err := c.conn.WriteBatch(r.ctrl[:]); err == nil {
		c.stats.naksSent.Add(1)
	}
}

// statusDue reports to a FlowMin sender once its position or its room
// moved on by a quarter of RecvWindow: the sender may be waiting for it.
func (r *receiver) statusDue(p *peer, now int64) {
	q := r.rw / 4
	if p.flowMin && (p.contig-p.statusPos >= q || p.next+r.rw-p.statusLim >= q) {
		r.sendStatus(p, now)
	}
}

// statusEvery is how often a receiver reports to a sender unasked:
// every StatusInterval to a FlowMin sender, which may be waiting for it;
// to a FlowMax sender, which never waits, only often enough to stay known
// (a quarter of ReceiverTimeout, at least StatusInterval). That sender
// also hears a receiver's status when it first hears the sender and when
// a fin heartbeat asks at Close. Every status wakes the sender's receive
// loop: at a millisecond each, three receivers' status was a tenth of
// the CPU a 50k msgs/s stream left over (the latency benchmark).
func (r *receiver) statusEvery(p *peer) int64 {
	every := int64(r.c.cfg.StatusInterval)
	if !p.flowMin {
		every = max(every, int64(r.c.cfg.ReceiverTimeout)/4)
	}
	return every
}

func (r *receiver) sendStatus(p *peer, now int64) {
	c := r.c
	h := header{kind: kindStatus, session: c.session, seq: p.contig}
	putHeader(r.ctrlBuf[:], &h)
	putStatus(r.ctrlBuf[headerLen:], p.key.session, p.next+r.rw)
	r.ctrl[0] = rdmanet.Message{Buffer: r.ctrlBuf[:c.seal(&r.seal, r.ctrlBuf[:], headerLen+statusPayload)], Addr: p.key.addr}
	if _, err := c.conn.WriteBatch(r.ctrl[:]); err == nil {
		c.stats.statusSent.Add(1)
	}
	p.statusPos, p.statusLim, p.statusAt = p.contig, p.next+r.rw, now
}

// next hands out the next message (or loss report) of the peers in turn.
// ok is false when there is none.
// now is the reader's clock when it just read the conn itself, or 0.
func (r *receiver) next(b []byte, now int64) (n int, from *rdmanet.Addr, loss *LossError, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, _, p, loss, ok := r.take(b, false, now)
	r.waiting = !ok
	if !ok {
		return 0, nil, nil, false
	}
	return n, p.addr, loss, true
}

// nextBatch hands out every ready message, up to len(ms), in the order
// next would. A loss report is handed out alone: when it is first, k is 0
// and loss and from name it; otherwise the batch ends before it and the
// next call returns it. k is 0 and loss nil when nothing is ready.
func (r *receiver) nextBatch(ms []rdmanet.Message) (k int, from *rdmanet.Addr, loss *LossError) {
	now := r.c.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for k < len(ms) {
		n, truncated, p, l, ok := r.take(ms[k].Buffer, k > 0, now)
		if !ok {
			break
		}
		if l != nil {
			return 0, p.addr, l
		}
		ms[k].N, ms[k].Truncated, ms[k].Addr = n, truncated, *p.addr
		k++
	}
	r.waiting = k == 0
	return k, nil, nil
}

// take hands out the next message (or loss report) with r.mu held; with
// noLoss it stops (ok false) at a loss report instead. now is the
// caller's clock (one reading for a batch), or 0: read it on delivery.
func (r *receiver) take(b []byte, noLoss bool, now int64) (n int, truncated bool, p *peer, loss *LossError, ok bool) {
	c := r.c
	for r.rLen > 0 {
		if noLoss && r.ready[r.rHead].lost > 0 {
			return 0, false, nil, nil, false
		}
		p = r.pop()
		if p.lost > 0 {
			loss = &LossError{From: p.key.addr, Session: p.key.session, Messages: p.lost}
			c.stats.lossesReported.Add(1)
			satAddCounter(&c.stats.msgLost, p.lost)
			p.lost = 0
			if p.headComplete(c.stride) {
				r.push(p)
			}
			return 0, false, p, loss, true
		}
		if !p.headComplete(c.stride) {
			continue
		}
		n, truncated = p.deliver(b, c.stride)
		if now == 0 {
			now = c.now()
		}
		r.delivered(p, n, truncated, now)
		return n, truncated, p, nil, true
	}
	return 0, false, nil, nil, false
}

// deliver copies the message at next into b and moves past it.
func (p *peer) deliver(b []byte, stride int) (n int, truncated bool) {
	d := p.slot(p.next, stride)
	nfrag := uint64(nfragOf(d))
	msg := msgOf(d)
	for i := uint64(0); i < nfrag; i++ {
		pl := p.slot(p.next+i, stride)[headerLen:]
		k := copy(b[n:], pl)
		n += k
		if k < len(pl) {
			truncated = true
		}
	}
	if msg > p.nextMsg && !p.joining {
		p.lost = satAdd(p.lost, msg-p.nextMsg) // cannot happen on a well-behaved sender
	}
	p.next += nfrag
	p.nextMsg = msg + 1
	p.slack = 0
	p.joining = false
	return n, truncated
}

// tick runs due NAKs, status reports and timeouts, and returns when it next
// has something to do.
func (r *receiver) tick(now int64) int64 {
	c := r.c
	r.mu.Lock()
	defer r.mu.Unlock()
	next := now + int64(c.cfg.StatusInterval)
	sweep := now-r.lastTick >= int64(c.cfg.StatusInterval)
	if sweep {
		r.lastTick = now
	}
	checked, waits := false, false
	r.held.Store(false)
	for k, p := range r.peers {
		if p.nak.state != nakIdle && now >= p.nak.due {
			b := r.backoff(p)
			// A retry's repair may be in the input not read yet, and
			// so may, where other receivers ask too (a back-off), the
			// repair another one's NAK brought: ask once the input is
			// read (drained), or at the next look.
			mayHold := p.nak.state == nakWaiting || backoffBound(b.g, b.srtt, b.fixed) > 0
			if mayHold && !checked {
				checked, waits = true, c.inputWaits()
			}
			switch {
			case mayHold && waits && now-p.nak.due < holdMax(&b):
				r.held.Store(true)
				if !p.nak.held {
					p.nak.held = true
					c.stats.naksHeld.Add(1)
				}
				next = min(next, now+inputRecheck)
			case !p.nak.lateDraw(now, &b) && !p.nak.hold(now, p.tx, &b):
				r.sendNAKs(p, now)
			}
		}
		if p.nak.state != nakIdle && p.nak.due < next && p.nak.due > now {
			next = p.nak.due
		}
		if !sweep {
			continue
		}
		if now-p.statusAt >= r.statusEvery(p) {
			r.sendStatus(p, now)
		}
		if p.ri.n != 0 && now-p.keptAt > int64(c.cfg.SenderTimeout) {
			p.shrink() // its ring unused for SenderTimeout: free it while empty
		}
		gone := now-p.heard > int64(c.cfg.SenderTimeout)
		done := p.fin && p.contig >= p.high
		if (gone || done) && !p.queued {
			if p.nak.state != nakIdle {
				r.pending--
			}
			delete(r.peers, k)
			if r.last == p {
				r.last = nil
			}
			if gone {
				c.stats.sendersTimedOut.Add(1)
				if !p.joining && !done {
					// Heard again (a stall, not a departure), it
					// resumes where it was: what it sent meanwhile
					// is repaired or reported lost, not skipped.
					r.remember(k, memo{seq: p.next, msg: p.nextMsg, at: now, resume: true})
				}
			}
		}
	}
	return next
}
