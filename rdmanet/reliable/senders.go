// The senders a receiver tracks: admitting, evicting and remembering
// them (MaxSenders, memos), and each one's receive ring.

package reliable

import (
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
	// statusOwed: a heartbeat asked for a report within StatusInterval
	// of the last one (answerHeartbeat); the timer loop sends it.
	statusOwed bool
}

// memo is where to start a sender that is not tracked now.
type memo struct {
	seq, msg uint64 // the first datagram to take, and its message
	at       int64  // last touched
	resume   bool   // evicted after it was tracked (else: refused)
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
	r.forget(v)
	r.c.stats.sendersEvicted.Add(1)
	return true
}

// forget drops p, and its part in the counts of peers with a NAK
// pending or a report owed.
func (r *receiver) forget(p *peer) {
	if p.nak.state != nakIdle {
		r.pending--
	}
	if p.statusOwed {
		r.owed--
	}
	delete(r.peers, p.key)
	if r.last == p {
		r.last = nil
	}
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
