// The queue of senders with a message or a loss to read, and taking
// messages from it into the reader's buffers.

package reliable

import (
	"github.com/go-rdma/rdmanet/rdmanet"
)

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
	p.countSkipped(msg) // none on a well-behaved sender
	p.next += nfrag
	p.nextMsg = msg + 1
	p.slack = 0
	p.joining = false
	return n, truncated
}
