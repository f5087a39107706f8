package rdmanet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"

	"github.com/go-rdma/rdmanet/internal/netaddr"
	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/ipoib"
)

const (
	sendBatch  = 64   // send completions polled at once
	maxAHCache = 1024 // unicast address handles kept
	// One send in signalShare is signaled: signalEvery is the depth over
	// signalShare. withDefaults raises a SendDepth under signalShare to
	// it, so that signalEvery is at least 1.
	signalShare = 4
)

// sendState is the send side: a ring of send slots in one registered arena,
// used in order. Sends are signaled selectively (every signalEvery-th), and
// a signaled completion frees every slot before it: UD sends on one send
// queue complete in order. Inline sends (payload up to the QP's inline
// limit) are posted from the caller's buffer (SendWR.Inline), which the
// post reads before it returns: they are copied at most once, by the
// provider, and take no ring slot's memory (their WR still counts against
// the send queue's depth). A datagram whose buffer lies in a SendBuffer
// is posted from there by its MR (sendbuf.go), and the last send of such a
// post is signaled, so that its completion is always reported.
type sendState struct {
	mu          sync.Mutex
	arena       *verbs.Arena
	mr          verbs.MR
	slotSize    uint32
	depth       uint64
	head, tail  uint64 // next sequence to post; oldest not yet completed
	signalEvery uint64
	maxInline   int
	wrs         []verbs.SendWR
	wcs         []verbs.WC
	waiter      verbs.CQWaiter
	deadline    atomic.Int64
	ahs         map[ipoib.GID]verbs.AH
	// The group the last WriteTo to a *net.UDPAddr went to: a stream of
	// sends to one group skips the group table's lock and map. leave
	// clears it (it holds mu).
	lastIP    netip.Addr
	lastGroup *membership
	// pending is the first send failure known only after its write
	// returned (reapSends): the next write returns it.
	pending error

	bufs       []*SendBuffer // the live SendBuffers
	freedSpans []span        // where freed SendBuffers were, oldest first
	// signaled is one past the last signaled send posted: completions
	// are reported up to it. bufStaged says the staged batch holds
	// SendBuffer memory, signalNext that the next post must signal its
	// last send (an earlier post of SendBuffer memory failed part way).
	signaled   uint64
	bufStaged  bool
	signalNext bool
	// lastBuf is one past the last SendBuffer send posted; done the
	// last count SendsDone returned.
	lastBuf, done uint64
	// bufNoInline posts SendBuffer memory by its SGE even within the
	// inline limit (tests and benchmarks).
	bufNoInline bool
}

// sendSlotSize is a send slot's bytes at mtu: a datagram, rounded up to
// a cache line (checkRings bounds the ring with it).
func sendSlotSize(mtu uint64) uint64 { return (mtu + 63) &^ 63 }

func (c *Conn) initSend() error {
	s := &c.wr
	s.depth = uint64(c.cfg.SendDepth)
	s.signalEvery = s.depth / signalShare
	s.slotSize = uint32(sendSlotSize(uint64(c.MTU())))
	s.maxInline = min(c.qp.MaxInline(), c.MTU())
	var err error
	if s.arena, err = verbs.NewArena(int(s.slotSize) * int(s.depth)); err != nil {
		return err
	}
	if s.mr, err = c.qp.RegisterMemory(s.arena); err != nil {
		return err
	}
	s.wrs = make([]verbs.SendWR, 0, sendBatch)
	s.wcs = make([]verbs.WC, sendBatch)
	s.ahs = make(map[ipoib.GID]verbs.AH)
	s.waiter, err = c.qp.SendCQ().NewWaiter(0)
	return err
}

// reapSends polls the send CQ and frees completed slots; wr.mu is held.
// An error completion is counted by reason, and the first one becomes
// pending for the next write.
func (c *Conn) reapSends() (int, error) {
	n, err := c.qp.SendCQ().Poll(c.wr.wcs)
	c.reaped(n)
	return n, err
}

// reaped frees the slots of the first n completions in wr.wcs; wr.mu is
// held.
func (c *Conn) reaped(n int) {
	s := &c.wr
	for i := 0; i < n; i++ {
		wc := &s.wcs[i]
		if wc.Status != verbs.WCSuccess {
			c.sendFailedLater(wc)
			c.sendFailed() // the QP may be in the error state: recover.go
		}
		s.tail = max(s.tail, wc.WRID+1)
	}
}

// sendFailedLater counts a send's error completion and keeps the first
// one pending; wr.mu is held.
func (c *Conn) sendFailedLater(wc *verbs.WC) {
	errno := sysErrno(wc.Errno)
	c.countSendError(sendReasonOf(errno))
	if c.wr.pending != nil {
		return
	}
	var err error = &wcSendError{wc.Status}
	if errno != 0 {
		err = os.NewSyscallError("sendmmsg", errno)
	}
	c.wr.pending = &earlierSendError{sendErrorOf(err)}
}

// takePending collects the send completions and returns the pending send
// failure, if any, clearing it; wr.mu is held. Every write calls it
// first: a failure known after one write returned is returned by the
// next.
func (c *Conn) takePending() error {
	s := &c.wr
	for {
		n, err := c.reapSends()
		if err != nil {
			return err
		}
		if n < len(s.wcs) {
			break
		}
	}
	err := s.pending
	s.pending = nil
	// A failed completion may have been the QP going to the error state
	// (recover.go): say so, with the completion's error beside it.
	if werr := c.checkWrite(); werr != nil {
		if err != nil {
			return fmt.Errorf("%w; %w", werr, err)
		}
		return werr
	}
	return err
}

// sendErrorOf is err as a write returns it: the kernel's EMSGSIZE is also
// ErrMessageTooLong.
func sendErrorOf(err error) error {
	if errno, ok := kernelSendErrno(err); ok && errno == errEMSGSIZE {
		return &kernelMsgSizeError{err}
	}
	return err
}

// sendFailedNow counts a send the kernel refused at once (the post of a
// lone datagram) and returns the error the write returns. Errors that are not the kernel's pass as they
// are.
func (c *Conn) sendFailedNow(err error) error {
	if errno, ok := kernelSendErrno(err); ok {
		c.countSendError(sendReasonOf(errno))
		return sendErrorOf(err)
	}
	return err
}

// ahFailed counts a unicast destination whose address handle could not be
// made (no route: the provider's errno, ENETUNREACH, EHOSTUNREACH, ...) and
// returns the error the write returns.
func (c *Conn) ahFailed(err error) error {
	var errno sysErrno
	if errors.As(err, &errno) && errno != 0 {
		c.countSendError(sendReasonOf(errno))
	}
	return err
}

// acquire waits until k slots are free (k <= depth); wr.mu is held.
func (c *Conn) acquire(k uint64) error {
	s := &c.wr
	if s.depth-(s.head-s.tail) >= k {
		return nil
	}
	return c.reapUntil(func() bool { return s.depth-(s.head-s.tail) >= k })
}

// reapUntil collects send completions until done says so, sleeping on
// the send CQ between polls, bounded by the write deadline; wr.mu is
// held.
func (c *Conn) reapUntil(done func() bool) error {
	s := &c.wr
	for !done() {
		if _, err := c.reapSends(); err != nil {
			return err
		}
		if done() {
			return nil
		}
		if deadlinePassed(&s.deadline) {
			return os.ErrDeadlineExceeded
		}
		n, err := s.waiter.WaitPoll(s.wcs)
		c.reaped(n)
		if err != nil {
			return c.mapWaitErr(err)
		}
	}
	return nil
}

// target is where a write goes.
type target struct {
	ah   verbs.AH
	qpn  uint32
	qkey uint32
}

// resolve maps a destination address to an AH, QPN and Q_Key; wr.mu is
// held (it guards the AH cache).
func (c *Conn) resolve(addr net.Addr) (target, error) {
	if a, ok := addr.(*Addr); ok && a != nil {
		return c.addrTarget(a)
	}
	if netaddr.IsNil[*Addr](addr) {
		return target{}, errMissingAddr
	}
	ipb, ok := groupIP(addr)
	if !ok {
		return target{}, &addrError{addr: addr, why: "want the group's *net.UDPAddr or *net.IPAddr, or an *rdmanet.Addr"}
	}
	ip, ok := netip.AddrFromSlice(ipb)
	if !ok || !ip.Unmap().IsMulticast() {
		return target{}, &addrError{addr: addr, why: "not a multicast group; send unicast to an *rdmanet.Addr"}
	}
	ip = ip.Unmap()
	s := &c.wr
	if s.lastGroup == nil || s.lastIP != ip {
		m := c.grp.lookupIP(ip)
		if m == nil {
			return c.groupTarget(addr, nil)
		}
		s.lastIP, s.lastGroup = ip, m
	}
	return c.groupTarget(addr, s.lastGroup)
}

func (c *Conn) addrTarget(a *Addr) (target, error) {
	if a.IsMulticast() {
		return c.groupTarget(a, c.grp.lookupMGID(a.GID))
	}
	if *a == (Addr{}) {
		return target{}, errMissingAddr // the zero Addr: a WriteBatch message with none
	}
	if a.GID.IsZero() || a.QPN == 0 || a.QPN >= 0xFFFFFF {
		return target{}, &addrError{addr: a, why: "not a unicast UD address (need a GID and a QPN below 0xFFFFFF)"}
	}
	s := &c.wr
	ah, ok := s.ahs[a.GID]
	if !ok {
		var err error
		ah, err = c.qp.CreateAH(verbs.AHAttr{
			DGID:      a.GID,
			SGIDIndex: uint8(c.local.GIDIndex),
			HopLimit:  64,
			IsGlobal:  true,
			PortNum:   uint8(c.local.Port),
		})
		if err != nil {
			return target{}, c.ahFailed(err)
		}
		if len(s.ahs) >= maxAHCache {
			for g, old := range s.ahs { // evict one
				old.Close()
				delete(s.ahs, g)
				break
			}
		}
		s.ahs[a.GID] = ah
	}
	return target{ah: ah, qpn: a.QPN, qkey: c.cfg.QKey}, nil
}

func (c *Conn) groupTarget(addr net.Addr, m *membership) (target, error) {
	if m == nil {
		return target{}, &addrError{addr: addr, why: ErrNotJoined.Error(), err: ErrNotJoined}
	}
	return target{ah: m.ah, qpn: m.m.RemoteQPN, qkey: m.m.QKey}, nil
}

// stage queues b's work request: from b's SendBuffer by its MR, inline
// from b itself, or copied into the next ring slot; wr.mu is held and a
// slot is free. b must stay unchanged until post. It fails, staging
// nothing, for b in a freed SendBuffer or running past one's end.
func (c *Conn) stage(b []byte, t target) error {
	s := &c.wr
	sb, off, err := s.bufferOf(b)
	if err != nil {
		return err
	}
	seq := s.head
	s.head++
	wr := verbs.SendWR{
		WRID:       seq,
		SGE:        verbs.SGE{Length: uint32(len(b)), LKey: s.mr.LKey()},
		AH:         t.ah,
		RemoteQPN:  t.qpn,
		RemoteQKey: t.qkey,
	}
	switch {
	case sb != nil:
		wr.SGE.Offset, wr.SGE.LKey = off, sb.lkey
		if len(b) <= s.maxInline && !s.bufNoInline {
			// Inline by SGE: the provider copies it from the
			// registered memory into the work request at the post.
			wr.Flags |= verbs.SendInline
		}
		sb.last = seq + 1
		s.lastBuf = seq + 1
		s.bufStaged = true
	case len(b) <= s.maxInline:
		wr.Flags |= verbs.SendInline
		wr.Inline = b
	default:
		wr.SGE.Offset = uint32(mod(seq, s.depth)) * s.slotSize
		copy(s.arena.Slice(wr.SGE.Offset, wr.SGE.Length), b)
	}
	if mod(seq, s.signalEvery) == s.signalEvery-1 {
		wr.Flags |= verbs.SendSignaled
	}
	s.wrs = append(s.wrs, wr)
	return nil
}

// mod is x % m, as a mask where m is a power of two (the default depths
// make it one): a 64-bit division costs tens of cycles on every write.
func mod(x, m uint64) uint64 {
	if m&(m-1) == 0 {
		return x & (m - 1)
	}
	return x % m
}

// post posts the staged work requests; the last one is signaled when the
// batch holds SendBuffer memory. On a failure the slots of the unposted
// ones are given back: they are the newest. A lone datagram the kernel
// refused is counted and its error returned.
func (c *Conn) post() (int, error) {
	c.signalLast()
	n, err := c.qp.PostSend(c.wr.wrs)
	return c.postDone(n, err)
}

// signalLast signals the last staged request when the batch holds
// SendBuffer memory or an earlier post stopped part way; wr.mu is held.
func (c *Conn) signalLast() {
	s := &c.wr
	if len(s.wrs) > 0 && (s.bufStaged || s.signalNext) {
		s.wrs[len(s.wrs)-1].Flags |= verbs.SendSignaled
	}
}

// reapPost is a lone write's takePending and post in one provider call
// (verbs.QP.PollPostSend: one cgo crossing on rdma-core, not two). When
// the poll finds a failed completion (or a whole poll's worth), nothing
// is posted: the completions are taken as takePending takes them, and a
// pending failure is returned with the staged request dropped, as a write
// that found it first would; otherwise the request is posted as post
// does. wr.mu is held.
func (c *Conn) reapPost() error {
	s := &c.wr
	c.signalLast()
	polled, n, err := c.qp.PollPostSend(s.wcs, s.wrs)
	c.reaped(polled)
	if n == 0 && err == nil {
		if err := c.takePending(); err != nil {
			c.postDone(0, nil) // unstage
			return err
		}
		_, err = c.post()
		return err
	}
	_, err = c.postDone(n, err)
	return err
}

// postDone accounts a post of the staged requests that posted n of them
// (postDone(0, nil) unstages them all) and returns the write's error;
// wr.mu is held.
func (c *Conn) postDone(n int, err error) (int, error) {
	s := &c.wr
	c.posted(n)
	clear(s.wrs) // keep no caller's buffer alive
	s.wrs = s.wrs[:0]
	atomic.AddUint64(&c.ctr.sent, uint64(n))
	if err != nil {
		// The kernel's refusal of the datagram is the write's error
		// itself, *os.SyscallError{"sendto", errno}, as net.UDPConn's.
		var se *os.SyscallError
		if _, ok := kernelSendErrno(err); ok && errors.As(err, &se) {
			err = se
		}
		err = c.sendFailedNow(err)
	}
	return n, err
}

func (c *Conn) checkSize(n int) error {
	if mtu := c.MTU(); n > mtu {
		return &msgSizeError{n, mtu}
	}
	return nil
}

// WriteTo sends b as one datagram to addr: a joined group's *net.UDPAddr
// or *net.IPAddr (the types JoinGroup takes; the port is ignored), or an
// *Addr naming a joined group's MGID, for multicast; or a peer's *Addr
// for a unicast UD datagram to that QP. nil, or a nil pointer, is a
// missing address and an error, as with net.UDPConn. A b longer than MTU() fails and nothing
// is sent. Zero-length datagrams are allowed.
//
// Errors are *net.OpError values, as net.UDPConn's. A datagram the kernel
// refuses returns its errno (errors.Is(err, errENETUNREACH),
// EMSGSIZE, EPERM, ENOBUFS, ...); a unicast peer with no route fails when
// its address handle is made, at the first write to it. A failure known
// only later (see ErrEarlierSendFailed) is returned by the next write,
// which then sends nothing. Every one is counted in Stats.SendFailed.
func (c *Conn) WriteTo(b []byte, addr net.Addr) (int, error) {
	if err := c.checkSize(len(b)); err != nil {
		return 0, c.opError("write", addr, err)
	}
	s := &c.wr
	s.mu.Lock()
	err := c.checkWrite()
	if err == nil && deadlinePassed(&s.deadline) {
		err = os.ErrDeadlineExceeded // at once, as net.UDPConn
	}
	if err == nil && s.pending != nil {
		err = c.takePending() // what the last write's poll found failed
	}
	var t target
	if err == nil {
		t, err = c.resolve(addr)
	}
	if err == nil {
		err = c.acquire(1)
	}
	if err == nil {
		if err = c.stage(b, t); err == nil {
			err = c.reapPost()
		}
	}
	s.mu.Unlock()
	if err != nil {
		return 0, c.opError("write", addr, err)
	}
	return len(b), nil
}

// WriteBatch sends each message's Buffer to its Addr (a group's Addr from
// GroupAddr or AddrFromMGID, or a peer's, as ReadBatch and ReadFrom
// return it; the zero Addr is a missing address) with one post per batch
// of up to 64. It returns how many were sent; on an error, the ones before it were.
//
// The kernel sends a batch after the post: a message it refuses is
// counted in Stats.SendFailed and returned by the next write as an
// ErrEarlierSendFailed wrapping its errno (a batch already returned
// cannot say which of its messages failed, or when).
func (c *Conn) WriteBatch(ms []Message) (int, error) {
	s := &c.wr
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := c.checkWrite(); err != nil {
		return 0, c.opError("write", nil, err)
	}
	if err := c.takePending(); err != nil {
		return 0, c.opError("write", nil, err)
	}
	sent := 0
	for sent < len(ms) {
		if err := c.checkWrite(); err != nil {
			return sent, c.opError("write", nil, err)
		}
		if deadlinePassed(&s.deadline) {
			return sent, c.opError("write", nil, os.ErrDeadlineExceeded)
		}
		k := min(len(ms)-sent, sendBatch, int(s.depth))
		if err := c.acquire(uint64(k)); err != nil {
			return sent, c.opError("write", nil, err)
		}
		var stageErr error
		var bad net.Addr
		for i := sent; i < sent+k; i++ {
			m := &ms[i]
			if err := c.checkSize(len(m.Buffer)); err != nil {
				stageErr, bad = err, &m.Addr
				break
			}
			t, err := c.addrTarget(&m.Addr)
			if err != nil {
				stageErr, bad = err, &m.Addr
				break
			}
			if err := c.stage(m.Buffer, t); err != nil {
				stageErr, bad = err, &m.Addr
				break
			}
			m.N = len(m.Buffer)
		}
		n, err := c.post()
		sent += n
		if err != nil {
			return sent, c.opError("write", nil, err)
		}
		if stageErr != nil {
			return sent, c.opError("write", bad, stageErr)
		}
	}
	return sent, nil
}

// posted accounts for the first n staged work requests having been
// posted, and gives back the rest; wr.mu is held.
func (c *Conn) posted(n int) {
	s := &c.wr
	var reg, copied uint64
	for i := range s.wrs[:n] {
		wr := &s.wrs[i]
		switch {
		case wr.SGE.LKey != s.mr.LKey():
			reg++ // a SendBuffer's, inline or not
		case wr.Flags&verbs.SendInline == 0:
			copied++
		}
		if wr.Flags&verbs.SendSignaled != 0 {
			s.signaled = wr.WRID + 1
		}
	}
	if reg > 0 {
		atomic.AddUint64(&c.ctr.sentRegistered, reg)
	}
	if copied > 0 {
		atomic.AddUint64(&c.ctr.sentCopied, copied)
	}
	if n < len(s.wrs) {
		s.head -= uint64(len(s.wrs) - n)
		for _, b := range s.bufs {
			b.last = min(b.last, s.head)
		}
		s.lastBuf = min(s.lastBuf, s.head)
		s.done = min(s.done, s.head) // the numbers given back are posted again
		if reg > 0 && s.signaled < s.head {
			s.signalNext = true // what was posted is not signaled
		}
	} else if s.signaled == s.head {
		s.signalNext = false
	}
	s.bufStaged = false
}
