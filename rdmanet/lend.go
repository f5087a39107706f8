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
type lendState struct {
	mu       sync.Mutex
	returned []verbs.RecvWR
	lent     atomic.Int64
}

// Datagram is a received datagram lent by ReadLend: Payload aliases the
// conn's registered receive buffer, so reading it costs no copy.
//
// The rule: call Release exactly once when done with Payload, and do not
// touch Payload after that. A buffer that is lent is a buffer the device
// cannot fill: while lent buffers are out, the receive ring is that much
// shallower, and when every buffer (ListenConfig.RecvDepth) is lent,
// arriving datagrams are dropped. Datagrams still lent at Close are
// reclaimed by Close; their Payload is invalid from then on.
type Datagram struct {
	Payload []byte
	From    Addr
	c       *Conn
	wrid    uint64
	done    bool
}

// ReadLend reads one datagram without copying it: the Datagram lends the
// receive buffer until Release. It allocates nothing.
func (c *Conn) ReadLend() (Datagram, error) {
	c.rd.mu.Lock()
	wc, buf, err := c.nextRecv(true)
	var d Datagram
	if err == nil {
		d = Datagram{Payload: buf[verbs.GRHSize:], c: c, wrid: wc.WRID}
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

// Release gives the buffer back to the receive ring. Calling it twice, or
// after the conn closed, does nothing.
func (d *Datagram) Release() {
	c := d.c
	if c == nil || d.done {
		return
	}
	d.done, d.Payload = true, nil
	l := &c.lend
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.closed.Load() {
		return
	}
	c.markLent(d.wrid, false)
	l.returned = append(l.returned, c.recvWR(d.wrid))
	lent := l.lent.Add(-1)
	// Post now when a batch is ready, or when so much is lent that a
	// reader might be waiting on an empty ring.
	if len(l.returned) >= repostBatch || lent >= int64(c.cfg.RecvDepth-repostBatch) {
		n, _ := c.qp.PostRecv(l.returned)
		l.returned = l.returned[:copy(l.returned, l.returned[n:])]
	}
}

// takeReturned moves released buffers to the reader's repost list; rd.mu
// is held.
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
