package rdmanet

import (
	"sync"
	"sync/atomic"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// lendState tracks receive buffers lent out by ReadLend. Release may run
// on any goroutine, also while a reader is blocked holding rd.mu, so
// returned buffers go through their own lock and are posted either by
// Release itself (a batch, or when the ring runs low) or by the next read.
//
// A Datagram is a value that callers copy, so what it holds cannot say
// whether its buffer was given back. The conn keeps that instead: one
// ownership word per receive buffer (indexed by its WRID), a generation
// count of its lendings. ReadLend gives the Datagram the word's value;
// Release moves it on by one with a compare-and-swap, which only the
// first Release of that lending can do: a second copy, a copy released
// concurrently, or a stale copy from an earlier lending of the same
// buffer all find another value and do nothing. Only Release moves the
// word, and a lent buffer goes back to the ring only through its Release
// (a reset keeps lent buffers out of it), so each lending has a value of
// its own. 64 bits never wrap in practice, so an old value cannot come
// round again. The word does not say whether the buffer is lent now: a
// reset reads the lent bitmap (recover.go).
type lendState struct {
	mu       sync.Mutex
	returned []verbs.RecvWR
	lent     atomic.Int64
	owner    []atomic.Uint64 // per receive buffer: its lendings' generation
}

// Datagram is a received datagram lent by ReadLend: Payload aliases the
// conn's registered receive buffer, so reading it costs no copy.
//
// The rule: call Release when done with Payload, and do not touch Payload
// (of any copy of the Datagram) after that. The buffer goes back to the
// ring exactly once, through whichever copy is released first: a second
// Release, on that copy or another, one racing it on another goroutine,
// one on a stale copy after the buffer was lent again, and one after
// Close do nothing. A buffer that is lent is a buffer the device cannot
// fill: while lent buffers are out, the receive ring is that much
// shallower, and when every buffer (ListenConfig.RecvDepth) is lent,
// arriving datagrams are dropped. Datagrams still lent at Close are
// reclaimed by Close; their Payload is invalid from then on.
type Datagram struct {
	Payload []byte
	From    Addr
	c       *Conn
	wrid    uint64
	lending uint64 // the buffer's ownership word while this lending lasts
}

// ReadLend reads one datagram without copying it: the Datagram lends the
// receive buffer until Release. It allocates nothing.
func (c *Conn) ReadLend() (Datagram, error) {
	c.rd.mu.Lock()
	wc, buf, err := c.nextRecv(true)
	var d Datagram
	if err == nil {
		d = Datagram{Payload: buf[verbs.GRHSize:], c: c, wrid: wc.WRID}
		d.lending = c.lend.owner[wc.WRID].Load() // Release moves it on
		d.From.QPN = wc.SrcQP
		if wc.Flags&verbs.WCGRH != 0 {
			d.From.GID = grhSGID(buf)
		}
		c.lend.lent.Add(1)
		c.markLent(wc.WRID, true)
		atomic.AddUint64(&c.ctr.received, 1)
	}
	c.rd.mu.Unlock()
	if err != nil {
		return Datagram{}, c.opError("read", nil, err)
	}
	return d, nil
}

// Release gives the buffer back to the receive ring and clears this
// copy's Payload. Only the first Release of a lending, through any copy,
// gives the buffer back; the others, and any after Close, do nothing. It
// is safe on any goroutine and allocates nothing.
func (d *Datagram) Release() {
	c := d.c
	d.Payload = nil
	if c == nil {
		return
	}
	l := &c.lend
	if !l.owner[d.wrid].CompareAndSwap(d.lending, d.lending+1) {
		return // released already, through this copy or another
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.closed.Load() {
		return
	}
	c.markLent(d.wrid, false)
	l.returned = append(l.returned, c.recvWR(d.wrid))
	// Post now when a batch is ready, or when so much is lent that a
	// reader might be waiting on an empty ring.
	if len(l.returned) >= repostBatch || l.lent.Load()-1 >= int64(c.cfg.RecvDepth-repostBatch) {
		n, _ := c.qp.PostRecv(l.returned)
		l.returned = l.returned[:copy(l.returned, l.returned[n:])]
	}
	// Last: a reader that finds nothing lent reads l.returned without
	// l.mu (takeReturned), so every write of it comes before.
	l.lent.Add(-1)
}

// takeReturned moves released buffers to the reader's repost list; rd.mu
// is held. With nothing lent it may look at l.returned without l.mu: each
// Release lowers lent after its last write of l.returned, and no buffer
// is lent again before rd.mu, which the caller holds, is free.
func (c *Conn) takeReturned() {
	l := &c.lend
	if l.lent.Load() == 0 && len(l.returned) == 0 {
		return
	}
	l.mu.Lock()
	c.rd.repost = append(c.rd.repost, l.returned...)
	l.returned = l.returned[:0]
	l.mu.Unlock()
}
