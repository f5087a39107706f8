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
