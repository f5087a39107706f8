// What a receiver sends back to a sender: NAKs (timed by feedback.go's
// back-off, held while input is unread) and status reports.

package reliable

import (
	"time"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// inputRecheck is how soon a NAK held for unread input looks again when
// no drained comes first (the reader reads one datagram at a time).
const inputRecheck = int64(time.Millisecond)

// holdMax is how long past due a NAK may be held for unread input: the
// back-off bound, at least maxRTO. A receiver that never reads its input
// dry still asks, that much later.
func holdMax(b *backoff) int64 {
	return max(backoffBound(b.g, b.srtt, b.fixed), int64(maxRTO))
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
// repair. Where nothing is missing (contig at or past high) and no round
// runs, it does nothing. r.mu is held.
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
			// r.mu makes this the one writer: Stats only loads it.
			c.stats.repairDelayMax.Store(max(c.stats.repairDelayMax.Load(), uint64(took)))
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

// statusEvery is how often a receiver reports to a sender unasked. To a
// FlowMin sender, which keeps the positions of its live receivers, a
// quarter of ReceiverTimeout (at least StatusInterval); what it waits
// for comes otherwise, as statusDue's reports when the position and the
// room move on and answerHeartbeat's to its heartbeats while a write
// waits. A FlowMax sender needs no positions, and a receiver it knows
// stays known by the receiver's own heartbeats (sender.heard): it is
// reported to when first heard, at its Close, and once a
// ReceiverTimeout, so that a first report lost on the way is made good.
// That holds while this conn's heartbeats come at least twice a
// ReceiverTimeout; otherwise it reports every ReceiverTimeout/4 too.
//
// Every member is a sender to the others: a report to each every
// ReceiverTimeout/4 came to 33,000 a second among 65 members, and with
// one every StatusInterval to a FlowMin sender, 64 receivers spent a
// third of their CPU sending status (BenchmarkFeedback).
func (r *receiver) statusEvery(p *peer) int64 {
	cfg := &r.c.cfg
	every := int64(cfg.ReceiverTimeout) / 4
	if !p.flowMin && 2*cfg.HeartbeatMax <= cfg.ReceiverTimeout {
		every = int64(cfg.ReceiverTimeout)
	}
	return max(int64(cfg.StatusInterval), every)
}

// answerHeartbeat answers a FlowMin sender's heartbeat sent while a
// write waits for the receivers' status (flagWait), when this receiver
// has news for it (its position or its room moved since its last
// report), or its last report is 4 StatusIntervals old and may have been
// lost on the way. At most once a StatusInterval: a heartbeat heard
// sooner leaves the answer to the timer loop (statusOwed).
func (r *receiver) answerHeartbeat(p *peer, now int64) {
	every := int64(r.c.cfg.StatusInterval)
	moved := p.contig != p.statusPos || p.next+r.rw != p.statusLim
	switch {
	case !moved && now-p.statusAt < 4*every:
	case now-p.statusAt >= every:
		r.sendStatus(p, now)
	case !p.statusOwed:
		p.statusOwed = true
		r.owed++
		r.c.kickTimers() // its due is new
	}
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
	if p.statusOwed {
		p.statusOwed = false
		r.owed--
	}
}
