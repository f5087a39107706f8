package rdmanet

import (
	"net"
	"os"
	"sync"
	"sync/atomic"

	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/ipoib"
)

const (
	recvBatch   = 64 // completions polled at once
	repostBatch = 32 // receives posted at once: one crossing per 32 on rdma-core
)

// recvState is the receive side: a ring of buffers in one registered arena,
// each GRH area + MTU, all posted; completions polled in batches and handed
// out one at a time; consumed buffers reposted in batches.
type recvState struct {
	mu       sync.Mutex
	arena    *verbs.Arena
	mr       verbs.MR
	slotSize uint32
	wcs      []verbs.WC
	head     int
	count    int
	repost   []verbs.RecvWR
	repostAt int // how many consumed buffers wait for one post
	waiter   verbs.CQWaiter
	deadline atomic.Int64
}

// recvSlotSize is a receive slot's bytes at mtu: the GRH and a datagram,
// rounded up to a cache line (checkRings bounds the ring with it).
func recvSlotSize(mtu uint64) uint64 { return (verbs.GRHSize + mtu + 63) &^ 63 }

func (c *Conn) initRecv() error {
	r := &c.rd
	r.slotSize = uint32(recvSlotSize(uint64(c.MTU())))
	var err error
	if r.arena, err = verbs.NewArena(int(r.slotSize) * c.cfg.RecvDepth); err != nil {
		return err
	}
	if r.mr, err = c.qp.RegisterMemory(r.arena); err != nil {
		return err
	}
	r.wcs = make([]verbs.WC, recvBatch)
	r.repost = make([]verbs.RecvWR, 0, c.cfg.RecvDepth)
	r.repostAt = max(1, min(repostBatch, c.cfg.RecvDepth/4))
	c.lend.returned = make([]verbs.RecvWR, 0, c.cfg.RecvDepth)
	c.lend.owner = make([]atomic.Uint64, c.cfg.RecvDepth)
	for i := 0; i < c.cfg.RecvDepth; i++ {
		r.repost = append(r.repost, c.recvWR(uint64(i)))
	}
	if err := c.flushReposts(); err != nil {
		return err
	}
	r.waiter, err = c.qp.RecvCQ().NewWaiter(c.cfg.Spin)
	return err
}

func (c *Conn) recvWR(slot uint64) verbs.RecvWR {
	return verbs.RecvWR{WRID: slot, SGE: verbs.SGE{
		Offset: uint32(slot) * c.rd.slotSize,
		Length: c.rd.slotSize,
		LKey:   c.rd.mr.LKey(),
	}}
}

// flushReposts posts the consumed buffers back to the receive queue.
func (c *Conn) flushReposts() error {
	r := &c.rd
	for len(r.repost) > 0 {
		n, err := c.qp.PostRecv(r.repost)
		r.repost = r.repost[:copy(r.repost, r.repost[n:])]
		if err != nil {
			return err
		}
	}
	return nil
}

// repostConsumed posts consumed buffers back before the CQ is polled: in
// batches (one post, on rdma-core one crossing, per batch), or at once
// when the ring runs low. rd.mu is held.
func (c *Conn) repostConsumed() error {
	r := &c.rd
	if c.rec.pending.Load() {
		c.recoverLocked() // a QP reset waits for rd.mu: recover.go
	}
	c.takeReturned()
	if len(r.repost) >= r.repostAt || c.cfg.RecvDepth-int(c.lend.lent.Load())-len(r.repost) < r.repostAt {
		return c.flushReposts()
	}
	return nil
}

// pollRecv fills the pending completions, which are empty: it reposts
// what was consumed, then polls the receive CQ, or with block wait-polls
// it (until completions arrive, the read deadline passes or the conn is
// closed). rd.mu is held.
func (c *Conn) pollRecv(block bool) (int, error) {
	r := &c.rd
	if err := c.repostConsumed(); err != nil {
		return 0, err
	}
	var n int
	var err error
	if block {
		n, err = r.waiter.WaitPoll(r.wcs)
	} else {
		n, err = c.qp.RecvCQ().Poll(r.wcs)
	}
	r.head, r.count = 0, n
	return n, err
}

// nextRecv returns the next deliverable completion and its payload,
// waiting when none is pending; rd.mu is held. The caller releases the
// buffer with releaseRecv after copying.
//
// A blocking call (the first datagram of a read) fails once the read
// deadline has passed, whether or not a datagram is waiting, as
// net.UDPConn's reads do.
func (c *Conn) nextRecv(block bool) (*verbs.WC, []byte, error) {
	r := &c.rd
	if block && deadlinePassed(&r.deadline) {
		if err := c.checkOpen(); err != nil {
			return nil, nil, err
		}
		return nil, nil, os.ErrDeadlineExceeded
	}
	for {
		if err := c.checkOpen(); err != nil {
			return nil, nil, err
		}
		if r.count == 0 {
			if deadlinePassed(&r.deadline) {
				return nil, nil, os.ErrDeadlineExceeded
			}
			n, err := c.pollRecv(block)
			if err != nil {
				return nil, nil, c.mapWaitErr(err)
			}
			if n == 0 && !block {
				return nil, nil, nil // nothing there
			}
			continue
		}
		wc := &r.wcs[r.head]
		r.head++
		r.count--
		if wc.Status != verbs.WCSuccess || wc.ByteLen < verbs.GRHSize || wc.ByteLen > r.slotSize {
			if wc.Status != verbs.WCWRFlushErr {
				atomic.AddUint64(&c.ctr.wcErrors, 1)
			}
			c.releaseRecv(wc)
			continue
		}
		off := uint32(wc.WRID) * r.slotSize
		buf := r.arena.Slice(off, wc.ByteLen)
		if !c.loopback.Load() && wc.SrcQP == c.self.QPN && wc.Flags&verbs.WCGRH != 0 && isOwnMulticast(buf, c.self.GID) {
			atomic.AddUint64(&c.ctr.loopback, 1)
			c.releaseRecv(wc)
			continue
		}
		return wc, buf, nil
	}
}

func (c *Conn) releaseRecv(wc *verbs.WC) {
	r := &c.rd
	r.repost = append(r.repost, c.recvWR(wc.WRID))
	if len(r.repost) >= r.repostAt {
		c.flushReposts() // a failure shows up as overflow drops
	}
}

// deliver copies a completion out: payload into b, sender into from.
func (c *Conn) deliver(wc *verbs.WC, buf []byte, b []byte, from *Addr) (n int, truncated bool) {
	payload := buf[verbs.GRHSize:]
	n = copy(b, payload)
	if n < len(payload) {
		truncated = true
		atomic.AddUint64(&c.ctr.truncated, 1)
	}
	from.QPN = wc.SrcQP
	from.GID = ipoib.GID{}
	if wc.Flags&verbs.WCGRH != 0 {
		from.GID = grhSGID(buf)
	}
	atomic.AddUint64(&c.ctr.received, 1)
	c.releaseRecv(wc)
	return n, truncated
}

// ReadFromAddr reads one datagram into b and returns its length and
// sender, as a value: it allocates nothing. It is the counterpart of
// net.UDPConn's ReadFromUDP (and ReadFromUDPAddrPort): a program that
// called those calls this. A datagram longer than b is truncated, as
// with UDP (Stats().Truncated counts it).
func (c *Conn) ReadFromAddr(b []byte) (n int, from Addr, err error) {
	c.rd.mu.Lock()
	wc, buf, err := c.nextRecv(true)
	if err == nil {
		n, _ = c.deliver(wc, buf, b, &from)
	}
	c.rd.mu.Unlock()
	if err != nil {
		return 0, Addr{}, c.opError("read", nil, err)
	}
	return n, from, nil
}

// ReadFrom implements net.PacketConn. The address is an *Addr.
func (c *Conn) ReadFrom(b []byte) (int, net.Addr, error) {
	n, from, err := c.ReadFromAddr(b)
	if err != nil {
		return 0, nil, err
	}
	return n, &from, nil
}

// Message is one datagram of a batch.
type Message struct {
	Buffer    []byte // read into / written from
	N         int    // bytes read or written
	Addr      Addr   // sender (ReadBatch) or destination (WriteBatch)
	Truncated bool   // ReadBatch: the datagram was longer than Buffer
}

// ReadBatch reads up to len(ms) datagrams: it blocks until at least one is
// there and returns as many as are ready, with one completion-queue poll
// for the batch.
func (c *Conn) ReadBatch(ms []Message) (int, error) {
	if len(ms) == 0 {
		return 0, c.opError("read", nil, c.checkOpen())
	}
	c.rd.mu.Lock()
	i := 0
	var err error
	for i < len(ms) {
		wc, buf, e := c.nextRecv(i == 0)
		if e != nil {
			if i == 0 {
				err = e
			}
			break
		}
		if wc == nil {
			break
		}
		ms[i].N, ms[i].Truncated = c.deliver(wc, buf, ms[i].Buffer, &ms[i].Addr)
		i++
	}
	c.rd.mu.Unlock()
	if err != nil {
		return 0, c.opError("read", nil, err)
	}
	return i, nil
}

// grhSGID returns the sender's GID from a receive buffer's GRH area. For
// RoCE v2 over IPv4 the area holds an IPv4 header in bytes 20-39 (bytes
// 0-19 undefined); otherwise it is an IPv6 header / IB GRH with the SGID at
// bytes 8-23. libibverbs tells them apart the same way.
func grhSGID(buf []byte) ipoib.GID { return grhGID(buf, 20+12, 8) }

// grhDGID returns the destination GID of the GRH area.
func grhDGID(buf []byte) ipoib.GID { return grhGID(buf, 20+16, 24) }

// grhGID reads a GID from the GRH area: an IPv4 address at v4 (mapped to
// ::ffff:a.b.c.d) in an IPv4 header, else 16 bytes at v6.
func grhGID(buf []byte, v4, v6 int) ipoib.GID {
	var g ipoib.GID
	if isIPv4GRH(buf) {
		g[10], g[11] = 0xff, 0xff
		copy(g[12:], buf[v4:v4+4])
		return g
	}
	copy(g[:], buf[v6:v6+16])
	return g
}

func isIPv4GRH(buf []byte) bool {
	return buf[0]>>4 != 6 && buf[20] == 0x45
}

// isOwnMulticast reports whether a datagram that came from this QP's
// number was a multicast one sent by this very port.
func isOwnMulticast(buf []byte, self ipoib.GID) bool {
	return grhSGID(buf) == self && grhDGID(buf).IsMulticast()
}
