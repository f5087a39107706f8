package reliable

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-rdma/rdmanet/rdmanet"
)

type receiver struct {
	c       *Conn
	mu      sync.Mutex
	peers   map[peerKey]*peer
	rw      uint64 // RecvWindow: the most datagrams a peer's ring holds
	maxFrag uint64 // the most fragments a message of MaxMessage bytes takes

	// memos remembers where to start senders not tracked now, at most
	// memoMax of them (the least recently touched goes first): one
	// evicted while idle, timed out or forgotten at its fin resumes at
	// its next; one refused (MaxSenders tracked, none idle) starts at
	// its first datagram refused, so what it sent meanwhile is repaired
	// or reported lost, not skipped.
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
	lastTick int64  // the last sweep (tick)
	sweepGap int64  // how often tick sweeps every peer
	owed     int    // peers with statusOwed
	rng      *rand.Rand
}

func (r *receiver) init(c *Conn) {
	r.c = c
	r.peers = make(map[peerKey]*peer)
	r.rw = uint64(c.cfg.RecvWindow)
	// MaxMessage is at least 1 and at most 0xffff fragments (bounds.go),
	// so this is 1 to 0xffff.
	r.maxFrag = uint64((c.cfg.MaxMessage + c.frag - 1) / c.frag)
	r.memos = make(map[peerKey]memo)
	r.memoMax = max(64, 4*c.cfg.MaxSenders)
	r.ready = make([]*peer, c.cfg.MaxSenders)
	r.notify = make(chan struct{}, 1)
	r.nakBuf = make([]byte, c.mtu)
	r.rng = rand.New(rand.NewPCG(uint64(c.session), uint64(time.Now().UnixNano())))
	r.sweepGap = sweepGap(&c.cfg)
}

// sweepGap is how often tick looks at every peer for what is due by the
// clock alone (reports to stay known, windows and senders to forget):
// an eighth of the shortest such period, at least StatusInterval. NAKs,
// held NAKs and owed reports have deadlines of their own. Looking at every
// peer every StatusInterval cost 64 receivers in one process, each
// hearing 65 members, a seventh of their CPU.
func sweepGap(cfg *Config) int64 {
	return max(int64(cfg.StatusInterval), min(int64(cfg.ReceiverTimeout)/4, int64(cfg.SenderTimeout))/8)
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
		m = max(m, p.srtt)
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
		at, atMsg := first, h.msg
		if h.start() {
			at, atMsg = 0, 0
		}
		r.start(p, at, atMsg, now)
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
		at, atMsg := h.seq, h.msg
		if h.start() {
			at, atMsg = 0, 0
		}
		r.start(p, at, atMsg, now)
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
	switch {
	case h.flags&flagFin != 0:
		p.fin = true
		r.sendStatus(p, now)
	case p.flowMin && h.flags&flagWait != 0:
		r.answerHeartbeat(p, now)
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
		p.countSkipped(msg)
		p.joining = false
		p.next, p.nextMsg = to, msg
		p.contig = max(p.contig, p.next)
		p.advance()
	}
	if !p.joining && p.headComplete(stride) {
		// Messages skipped at the head (a message too long ended where
		// its sender's next one is numbered further on): report them
		// before the message, at their place.
		m := msgOf(p.slot(p.next, stride))
		p.countSkipped(m)
		p.nextMsg = max(p.nextMsg, m)
	}
	if !p.queued && (p.lost > 0 || p.headComplete(stride)) {
		r.push(p)
	}
	r.nakUpdate(p, now)
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

// countSkipped counts lost the messages from nextMsg up to msg, reached
// without them (none where msg is not past nextMsg). While joining
// (FromWindowStart, where to start not known yet), none: the peer starts
// at msg.
func (p *peer) countSkipped(msg uint64) {
	if !p.joining && msg > p.nextMsg {
		p.lost = satAdd(p.lost, msg-p.nextMsg)
	}
}

// skipLong moves next past the message too long to keep, which it has
// reached, and reports it lost.
func (p *peer) skipLong() {
	if p.next == p.longStart {
		p.countSkipped(p.longMsg)
		p.lost = satAdd(p.lost, 1) // the message itself
		p.joining = false
		p.next, p.nextMsg = p.longEnd, p.longMsg+1
		p.slack = p.longEnd - p.longStart - 1
	} else if p.next < p.longEnd { // a window start inside it (forged)
		p.next, p.nextMsg = p.longEnd, max(p.nextMsg, p.longMsg+1)
	}
	p.longStart, p.longEnd, p.longMsg = 0, 0, 0
	p.contig = max(p.contig, p.next)
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

// tick runs due NAKs, status reports and timeouts, and returns when it next
// has something to do.
func (r *receiver) tick(now int64) int64 {
	c := r.c
	r.mu.Lock()
	defer r.mu.Unlock()
	sweep := now-r.lastTick >= r.sweepGap
	if sweep {
		r.lastTick = now
	}
	next := r.lastTick + r.sweepGap
	if !sweep && r.pending == 0 && r.owed == 0 {
		r.held.Store(false)
		return next
	}
	checked, waits := false, false
	r.held.Store(false)
	for _, p := range r.peers {
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
		if p.statusOwed {
			if at := p.statusAt + int64(c.cfg.StatusInterval); now >= at {
				r.sendStatus(p, now)
			} else {
				next = min(next, at)
			}
		}
		if !sweep {
			continue
		}
		if now-p.statusAt >= r.statusEvery(p) {
			r.sendStatus(p, now)
		}
		if now-p.keptAt > int64(c.cfg.SenderTimeout) {
			p.shrink() // its ring unused for SenderTimeout: free it while empty (with none, a no-op)
		}
		gone := now-p.heard > int64(c.cfg.SenderTimeout)
		done := p.fin && p.contig >= p.high
		if (gone || done) && !p.queued {
			r.forget(p)
			if gone {
				c.stats.sendersTimedOut.Add(1)
			}
			if !p.joining {
				// Heard again, it resumes where it was: after a
				// stall (not a departure), what it sent meanwhile
				// is repaired or reported lost, not skipped; after
				// its fin, a heartbeat of its linger places it at
				// its end, not at seq 0 as one sent in its start
				// (hbStart) would, taking what was read again.
				r.remember(p.key, memo{seq: p.next, msg: p.nextMsg, at: now, resume: true})
			}
		}
	}
	return next
}
