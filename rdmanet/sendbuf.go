package rdmanet

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"unsafe"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// ErrSendBufferFreed is returned (wrapped in a *net.OpError) by a write
// whose buffer lies in a SendBuffer that was freed: nothing is sent.
var ErrSendBufferFreed = errors.New("buffer lies in a freed SendBuffer")

// maxFreedSpans is how many freed SendBuffers a conn remembers, to refuse
// writes from their memory.
const maxFreedSpans = 64

// SendBuffer is memory registered for sending on one Conn: an mmap'd
// arena outside the Go heap, registered as a memory region (MR) with the
// conn's protection domain. A datagram whose Buffer lies inside it (a
// subslice of Bytes) is posted from there by its MR's LKey and offset:
// WriteTo and WriteBatch copy nothing, and the device reads the bytes
// itself, after the write returned (by DMA on a NIC).
//
// # When the memory may change
//
// The bytes of a posted datagram must not change until its send
// completed. Sends on a conn are numbered in the order they are posted
// and complete in that order: every datagram of a write that has
// returned is numbered below SendsPosted() read after it, and its memory
// may change once SendsDone() (or WaitSends) has reached that number. A
// program that reuses a region records SendsPosted() after the write, in
// a variable of its own (no allocation, no system call per message), and
// before it rewrites the region checks SendsDone, or waits with
// WaitSends. Rewriting earlier may send the new bytes, or a mix, in the
// datagram already posted.
//
// The conn signals the last send of every post that carries SendBuffer
// memory, so SendsDone reaches every such datagram without further
// writes. On the software backend a send completes inside its post: the
// bytes are in the kernel when the write returns, and SendsDone is at
// SendsPosted at once. A QP that was reset after an error forgets what
// it had posted: those sends count as done.
//
// A datagram of SendBuffer memory is posted from the registered memory by
// its SGE on both backends; up to the QP's inline limit (rdma-core:
// ListenConfig.MaxInline, 256 by default) with the inline flag, so that
// the provider copies it from there into the work request at the post
// (as small sends are best posted on NICs; on rxe under QEMU it measured
// within noise of the device reading it, BenchmarkSendFrom), and longer
// ones are read by the device. Either way
// rdmanet copies nothing (Stats.SentRegistered counts both); the rule of
// the completion above holds for both. Memory outside every SendBuffer
// is sent as before: inline up to the inline limit, else copied into the
// conn's own send ring; it may change as soon as the write returns.
//
// On rdma-core a QP takes at most 16 memory regions and a conn uses two
// of its own: NewSendBuffer fails (ENOSPC) past 14.
type SendBuffer struct {
	c     *Conn
	arena *verbs.Arena
	mr    verbs.MR
	lkey  uint32
	base  uintptr
	size  uintptr
	last  uint64 // one past the number of its last send posted; wr.mu
	freed bool   // wr.mu
}

// span is the address range of a freed SendBuffer.
type span struct{ base, size uintptr }

// NewSendBuffer allocates size bytes (rounded up to whole pages) outside
// the Go heap and registers them for sending on c. Close frees every
// SendBuffer of the conn; Free frees one before.
func (c *Conn) NewSendBuffer(size int) (*SendBuffer, error) {
	s := &c.wr
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := c.checkOpen(); err != nil {
		return nil, c.opError("register", nil, err)
	}
	a, err := verbs.NewArena(size)
	if err != nil {
		return nil, c.opError("register", nil, err)
	}
	mr, err := c.qp.RegisterMemory(a)
	if err != nil {
		a.Free()
		return nil, c.opError("register", nil, err)
	}
	b := a.Bytes()
	sb := &SendBuffer{
		c:     c,
		arena: a,
		mr:    mr,
		lkey:  mr.LKey(),
		base:  uintptr(unsafe.Pointer(unsafe.SliceData(b))),
		size:  uintptr(len(b)),
	}
	// New memory at the address of a freed buffer is this one's.
	s.freedSpans = deleteOverlaps(s.freedSpans, span{sb.base, sb.size})
	s.bufs = append(s.bufs, sb)
	return sb, nil
}

// deleteOverlaps drops the spans that overlap n.
func deleteOverlaps(spans []span, n span) []span {
	out := spans[:0]
	for _, sp := range spans {
		if sp.base < n.base+n.size && n.base < sp.base+sp.size {
			continue
		}
		out = append(out, sp)
	}
	clear(spans[len(out):])
	return out
}

// Bytes returns the whole buffer (its length is Len). The slice must not
// be used after Free or the conn's Close: the memory is unmapped.
func (b *SendBuffer) Bytes() []byte {
	s := &b.c.wr
	s.mu.Lock()
	defer s.mu.Unlock()
	if b.freed {
		return nil
	}
	return b.arena.Bytes()
}

// Len is the buffer's size in bytes: the size asked for, rounded up to
// whole pages.
func (b *SendBuffer) Len() int { return int(b.size) }

// Free waits, bounded by the write deadline, for the buffer's posted sends
// to complete, then deregisters its MR and unmaps it. A later write of its
// memory fails with ErrSendBufferFreed while the buffer is among the
// conn's last 64 freed ones (it remembers no more); a write of older freed
// memory is a use after free, as with any unmapped memory. Free is
// idempotent; after the conn's Close it does nothing (Close freed the
// buffer). If the wait fails (the deadline, a closed conn) the buffer
// stays as it was.
func (b *SendBuffer) Free() error {
	c := b.c
	s := &c.wr
	s.mu.Lock()
	defer s.mu.Unlock()
	if b.freed {
		return nil
	}
	if err := c.waitSends(b.last); err != nil {
		return c.opError("free", nil, err)
	}
	b.freed = true
	if i := slices.Index(s.bufs, b); i >= 0 {
		s.bufs = slices.Delete(s.bufs, i, i+1)
	}
	if len(s.freedSpans) == maxFreedSpans {
		s.freedSpans = slices.Delete(s.freedSpans, 0, 1)
	}
	s.freedSpans = append(s.freedSpans, span{b.base, b.size})
	err := b.mr.Close()
	if ferr := b.arena.Free(); err == nil {
		err = ferr
	}
	if err != nil {
		return c.opError("free", nil, err)
	}
	return nil
}

// freeBuffers unmaps every SendBuffer at Close, after the ID (and with it
// every MR) is gone; wr.mu is held.
func (c *Conn) freeBuffers() {
	s := &c.wr
	for _, b := range s.bufs {
		b.freed = true
		b.arena.Free()
	}
	clear(s.bufs)
	s.bufs = s.bufs[:0]
}

// bufferOf finds the SendBuffer that holds all of p, and p's offset in
// it; nil when p lies in none (or is empty). p in a freed buffer, or
// running over a buffer's end, is an error. wr.mu is held.
func (s *sendState) bufferOf(p []byte) (*SendBuffer, uint32, error) {
	if len(p) == 0 || (len(s.bufs) == 0 && len(s.freedSpans) == 0) {
		return nil, 0, nil
	}
	a := uintptr(unsafe.Pointer(unsafe.SliceData(p)))
	n := uintptr(len(p))
	for _, b := range s.bufs {
		if off := a - b.base; off < b.size {
			if n > b.size-off {
				return nil, 0, fmt.Errorf("%d-byte buffer at offset %d runs past the end of its %d-byte SendBuffer", n, off, b.size)
			}
			return b, uint32(off), nil
		}
	}
	for _, sp := range s.freedSpans {
		if a-sp.base < sp.size {
			return nil, 0, ErrSendBufferFreed
		}
	}
	return nil, 0, nil
}

// SendsPosted returns how many sends the conn has posted: every datagram
// of a write that returned before the call is numbered below it. See
// SendBuffer for what the number is for.
func (c *Conn) SendsPosted() uint64 {
	s := &c.wr
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.head
}

// SendsDone polls the send completion queue (no system call on either
// backend) and returns a count below which every SendBuffer datagram's
// send has completed: the memory of one numbered below it may change.
// Sends from other memory may be in flight beyond it (they hold none of a
// SendBuffer's); once every SendBuffer send completed it is SendsPosted.
// It never decreases. After Close it returns SendsPosted.
func (c *Conn) SendsDone() uint64 {
	s := &c.wr
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.checkOpen() == nil {
		c.reapSends()
	} else {
		s.tail = s.head
	}
	return s.doneCount()
}

// doneCount is SendsDone's count from what was reaped; wr.mu is held.
func (s *sendState) doneCount() uint64 {
	d := s.tail
	if s.tail >= s.lastBuf {
		d = s.head // every SendBuffer send posted has completed
	}
	s.done = max(s.done, d)
	return s.done
}

// WaitSends waits until SendsDone() reaches n, bounded by the write
// deadline (os.ErrDeadlineExceeded). An n above SendsPosted() fails at
// once, and so does one whose SendBuffer sends have no signaled send
// after them yet (a batch whose post failed part way: the next write
// signals its last send). After Close it returns a *net.OpError
// wrapping net.ErrClosed.
func (c *Conn) WaitSends(n uint64) error {
	s := &c.wr
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.closed.Load() {
		return c.opError("write", nil, net.ErrClosed)
	}
	if err := c.waitSends(n); err != nil {
		return c.opError("write", nil, err)
	}
	return nil
}

// errUnsignaled: the sends waited for have no signaled send after them
// (a batch whose post failed part way).
var errUnsignaled = errors.New("the sends waited for are not signaled yet: the next write signals them")

// waitSends waits until doneCount reaches n; wr.mu is held.
func (c *Conn) waitSends(n uint64) error {
	s := &c.wr
	if n > s.head {
		return fmt.Errorf("wait for %d sends, %d posted", n, s.head)
	}
	if s.doneCount() >= n {
		return nil
	}
	if err := c.checkOpen(); err != nil {
		if c.closed.Load() {
			s.tail = s.head // the QP is gone, and nothing it posted is read
			return nil
		}
		return err
	}
	if n > s.signaled && s.lastBuf > s.signaled {
		s.signalNext = true
		return errUnsignaled
	}
	return c.reapUntil(func() bool { return s.doneCount() >= n })
}
