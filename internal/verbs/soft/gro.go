//go:build linux

package soft

import (
	"encoding/binary"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/roce"
	"github.com/go-rdma/rdmanet/internal/verbs"
)

// # Receive-side GRO
//
// A sender's run of equal datagrams leaves as one UDP GSO skb (roce.CutRuns).
// A receiving socket without UDP_GRO has the kernel cut it back into
// datagrams as it queues it (udp_rcv_segment: on loopback in the
// sender's context), one skb each; a socket with UDP_GRO queues the run
// whole, and one read returns all of it, with a UDP_GRO control message
// giving the segment size: the payload is the run's datagrams back to
// back, each seg bytes but the last, which may be shorter. Each is a
// RoCEv2 datagram of its own (BTH, DETH, ICRC sealed for its IP ID: the
// kernel numbers the segments' IDs 0, 1, 2, ...), and each completes its
// own posted receive or is dropped and counted on its own.
//
// A coalesced read can be 64 KiB, so every read of a GRO socket gives
// each slot an overflow past the posted buffer (or past the header,
// buffer and tail scratch): a row of a groArea, which a CQ takes from a
// pool shared by all QPs for the length of a read (idle conns hold
// none). A slot whose datagram fit the posted buffer completes in place
// as without GRO. From the first slot that was coalesced or spilled into
// the overflow on, the read completes by copy: those slots' bytes in the
// posted buffers are moved in front of their overflow, so each slot is
// contiguous in its row, and each datagram is copied into the next posted
// buffer by the pass that checks its ICRC (roce.CRCCopy). Datagrams for which
// no receive is posted, or no room is left in the caller's completions,
// stay in the row (pending) and come first in the next Poll, as they
// would have stayed in the socket buffer: nothing a read took is lost.

const (
	// groPrefix is the room in front of a row's overflow for what of a
	// slot landed in its posted buffer: at most a datagram in place
	// (hdrSize + MTU + inPlaceSlack, the region being cut to it) or the
	// header, buffer and tail of a scattered one.
	groPrefix = 4224
	// groRoom is a row's overflow: a coalesced read is an IPv4 datagram's
	// UDP payload, under 64 KiB.
	groRoom = 1 << 16
	groRow  = groPrefix + groRoom
)

// groRun walks the datagrams of one coalesced read: data is the read,
// seg the segment size from UDP_GRO (0 or at least len(data): one
// datagram). It is a pure cursor: a table test drives it with synthetic
// buffers. id, which the cursor does not read, is the IP ID the run's next
// datagram most likely has, the guess the ICRC check solves from: a GSO
// run's IDs count up from its first's, which a run guesses to be 0, the
// zero value (a wrong guess costs only Solve's steps).
type groRun struct {
	data []byte
	seg  int
	off  int
	id   uint16
}

// next returns the next datagram and whether there was one.
func (r *groRun) next() ([]byte, bool) {
	if r.off >= len(r.data) {
		return nil, false
	}
	end := len(r.data)
	if r.seg > 0 {
		end = min(r.off+r.seg, end)
	}
	d := r.data[r.off:end]
	r.off = end
	return d, true
}

// left is how many datagrams next has still to return.
func (r *groRun) left() int {
	rest := len(r.data) - r.off
	switch {
	case rest <= 0:
		return 0
	case r.seg <= 0:
		return 1
	}
	return (rest + r.seg - 1) / r.seg
}

// groArea is the overflow of a read of up to recvBatch slots, a row each,
// and where each slot's bytes are once it completes by copy. Its memory is
// mapped, not from the Go heap: only the pages coalesced reads write
// become resident.
type groArea struct {
	mem  []byte
	data [recvBatch][]byte
}

func (a *groArea) row(i int) []byte { return a.mem[i*groRow : (i+1)*groRow] }

// groPool holds the areas: groPoolMax of them in place (no heap
// allocation when another CQ reads at the same time), mapped when first
// needed, so a process maps as many as it has concurrent reads of GRO
// sockets (and CQs with datagrams pending). Past groPoolKeep free ones, an
// area given back drops its pages (MADV_DONTNEED); past groPoolMax in use,
// one more is made and unmapped when given back.
var groPool struct {
	mu    sync.Mutex
	areas [groPoolMax]groArea
	made  int
	free  [groPoolMax]*groArea
	nfree int
}

const (
	groPoolMax  = 64
	groPoolKeep = 8
)

func getGROArea() (*groArea, error) {
	groPool.mu.Lock()
	if groPool.nfree > 0 {
		groPool.nfree--
		a := groPool.free[groPool.nfree]
		groPool.mu.Unlock()
		return a, nil
	}
	var a *groArea
	if groPool.made < groPoolMax {
		a = &groPool.areas[groPool.made]
	}
	mem, err := mapGROArea()
	if err != nil {
		groPool.mu.Unlock()
		return nil, err
	}
	if a != nil {
		groPool.made++
	} else {
		a = new(groArea)
	}
	a.mem = mem
	groPool.mu.Unlock()
	return a, nil
}

func mapGROArea() ([]byte, error) {
	mem, err := unix.Mmap(-1, 0, recvBatch*groRow, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, os.NewSyscallError("mmap", err)
	}
	return mem, nil
}

func putGROArea(a *groArea) {
	clear(a.data[:]) // keep no slice of a row another CQ will write
	p := &groPool
	p.mu.Lock()
	defer p.mu.Unlock()
	inPool := uintptr(unsafe.Pointer(a))-uintptr(unsafe.Pointer(&p.areas[0])) < unsafe.Sizeof(p.areas)
	if !inPool {
		unix.Munmap(a.mem)
		return
	}
	if p.nfree >= groPoolKeep {
		unix.Madvise(a.mem, unix.MADV_DONTNEED)
	}
	p.free[p.nfree] = a
	p.nfree++
}

// groState is the receive CQ's GRO: which sockets have it, the area a
// read holds, and the rest of a read completing by copy (slots [slot,
// end) of the read on socket sock, the slot's datagrams in run).
type groState struct {
	// For each socket (multicast, unicast): on, it may hold coalesced
	// runs, so its reads get overflows; active, it has UDP_GRO now; want,
	// runs arrive at it; quiet, reads with GRO since the last coalesced
	// one. seen: the read in progress showed a later segment of a run.
	// off: the QP did not ask for it (or groOff), or the kernel refused it.
	on, active, want [2]bool
	quiet            [2]int
	seen             bool
	off              bool
	area             *groArea

	sock, slot, end int
	started         bool    // run and meta are slot's
	run             groRun  // slot's datagrams
	meta            rxMeta  // slot's control messages
	bare            bool    // the read was bare
	bareDst         [4]byte // and its datagrams' destination

	coalesced, segs uint64 // coalesced reads, and the datagrams they held (tests)
}

// groOff, set by a test, keeps UDP_GRO off even where a QP asks for it
// (QPConfig.GRO); it is false otherwise.
var groOff bool

// When UDP_GRO is on. A read of a socket with it costs a little more
// than one without (an overflow iovec, room for its control message, no
// recvfrom), which request/response traffic would pay on every datagram
// for nothing, so a socket gets it only once runs arrive: a datagram
// whose solved IP ID is not 0 is a later segment of a GSO run the kernel
// cut (or from a sender that numbers its IDs). It goes off again after
// groQuietReads reads with no coalesced one, and from a Poll that finds
// no receive posted until receives are posted again: a run the kernel
// drops from a full socket buffer counts once in the socket's drops
// (sk_drops counts skbs), where the same run cut into datagrams counts
// each, so while the consumer posts no receives, and the socket buffer is
// what holds datagrams, they queue as datagrams and Drops.Overflow counts
// each one. (A consumer that stops reading with receives posted keeps GRO
// on: a run dropped then counts once.) Once off, reads keep their
// overflows until the socket was read dry, since runs queued before may
// still be there. A kernel that refuses UDP_GRO (before 5.0) leaves the QP
// without.
const groQuietReads = 256

// setGRO turns UDP_GRO on socket s on or off, if it is not already; c.mu
// is held.
func (c *recvCQ) setGRO(s int, active bool) {
	g := &c.gro
	fd := [2]int{c.q.mcFd, c.q.uniFd}[s]
	if g.off || g.active[s] == active || fd < 0 {
		return
	}
	if err := setBoolOpt(fd, unix.SOL_UDP, unix.UDP_GRO, active); err != nil {
		if active && !g.on[s] {
			g.off = true // never had it: the kernel cannot
		}
		return
	}
	g.active[s], g.quiet[s] = active, 0
	g.on[s] = g.on[s] || active
}

// groNoReceives turns GRO off on both sockets, for as long as no receive
// is posted; groReceivesPosted turns it back on where runs were arriving.
func (c *recvCQ) groNoReceives() {
	c.setGRO(0, false)
	c.setGRO(1, false)
}

func (c *recvCQ) groReceivesPosted() {
	for s := range 2 {
		if c.gro.want[s] {
			c.setGRO(s, true)
		}
	}
}

// groLearn notes what a read of socket sock showed: later segments of a
// run cut by the kernel (runs arrive: GRO on), or, with GRO on, whether it
// was coalesced (groQuietReads reads that are not: off).
func (c *recvCQ) groLearn(sock int, coalesced bool) {
	g := &c.gro
	switch {
	case g.seen:
		g.seen = false
		g.want[sock] = true
		if c.n > 0 {
			c.setGRO(sock, true)
		}
	case !g.active[sock]:
	case coalesced:
		g.quiet[sock] = 0
	default:
		if g.quiet[sock]++; g.quiet[sock] >= groQuietReads {
			g.want[sock] = false
			c.setGRO(sock, false)
		}
	}
}

// pending says whether datagrams of the last read wait to complete.
func (g *groState) pending() bool { return g.slot < g.end }

// hold takes an area for a read, if the CQ holds none.
func (g *groState) hold() error {
	if g.area != nil {
		return nil
	}
	a, err := getGROArea()
	g.area = a
	return err
}

// release gives the area back unless datagrams in it are pending.
func (g *groState) release() {
	if g.area != nil && !g.pending() {
		putGROArea(g.area)
		g.area = nil
	}
}

// drop forgets pending datagrams and gives the area back (destroy).
func (g *groState) drop() {
	g.end = g.slot // none pending; a read sets both
	g.release()
}

// regionLen is how many bytes of slot i's read land before its overflow.
func (c *recvCQ) regionLen(i int) int {
	if c.msgs[i].Hdr.Iov == &c.iov[i][3] { // in place
		return int(c.iov[i][3].Len)
	}
	return int(c.iov[i][0].Len + c.iov[i][1].Len + c.iov[i][2].Len)
}

// firstCopied is the first of the got slots of a GRO read that must
// complete by copy: coalesced (a UDP_GRO message with a segment size
// under its length) or spilled into the overflow; got if none.
func (c *recvCQ) firstCopied(got int) int {
	for i := range got {
		m := &c.msgs[i]
		n := int(m.Len)
		if n > c.regionLen(i) {
			return i
		}
		if seg := groSeg(c.ctrl[i][:m.Hdr.Controllen]); seg > 0 && seg < n {
			return i
		}
	}
	return got
}

// moveOut makes each of slots [from, got) contiguous in its row, moving
// what landed in its posted buffer (or scratch) in front of the overflow,
// before those buffers take other datagrams.
func (c *recvCQ) moveOut(from, got int) {
	a := c.gro.area
	for i := from; i < got; i++ {
		n := int(c.msgs[i].Len)
		k := min(n, c.regionLen(i))
		row := a.row(i)
		dst := row[groPrefix-k : groPrefix]
		iov := c.iov[i][:3]
		if c.msgs[i].Hdr.Iov == &c.iov[i][3] {
			iov = c.iov[i][3:4]
		}
		for _, v := range iov {
			dst = dst[copy(dst, iovBytes(v)):]
		}
		a.data[i] = row[groPrefix-k : groPrefix+n-k]
	}
}

// startCopied begins completing slots [from, got) of the read of socket
// sock by copy.
func (c *recvCQ) startCopied(sock, from, got int) {
	g := &c.gro
	g.sock, g.slot, g.end, g.started = sock, from, got, false
	g.bare, g.bareDst = c.bare, c.bareDst
}

// completeCopied completes pending datagrams into the posted buffers, in
// order, until none is left, no receive is posted or wcs is full; it
// returns how many completions it wrote. A dropped datagram is counted
// and its buffer stays posted.
func (c *recvCQ) completeCopied(wcs []verbs.WC) int {
	g := &c.gro
	n := 0
	for g.pending() {
		if !g.started {
			c.startSlot(g.slot)
		}
		for g.run.left() > 0 {
			if n == len(wcs) || c.n == 0 {
				return n
			}
			d, _ := g.run.next()
			r := c.acceptCopied(d, c.rq[c.head], &wcs[n])
			if r != roce.Accepted {
				c.q.drops[r].Add(1)
				continue
			}
			c.head = (c.head + 1) % len(c.rq)
			c.n--
			n++
		}
		g.slot++
		g.started = false
	}
	return n
}

// startSlot reads slot i's control messages and sets up its run.
func (c *recvCQ) startSlot(i int) {
	g := &c.gro
	m := &c.msgs[i]
	ctrl := c.ctrl[i][:m.Hdr.Controllen]
	if g.bare {
		g.meta = rxMeta{dst: g.bareDst, seg: groSeg(ctrl)}
	} else {
		parseCmsgs(ctrl, &g.meta)
		if g.meta.hasOvfl {
			c.q.noteSockDrops(g.sock, g.meta.ovfl)
		}
	}
	g.run = groRun{data: g.area.data[i], seg: g.meta.seg}
	g.started = true
	if m.Hdr.Flags&unix.MSG_TRUNC != 0 {
		// Longer than a row: nothing to split it by that can be trusted.
		c.q.drops[roce.DropTooLong].Add(1)
		g.run = groRun{}
		return
	}
	if g.run.left() > 1 {
		g.coalesced++
		g.segs += uint64(g.run.left())
	}
}

// acceptCopied validates datagram d of the pending slot, copying its
// payload into e's buffer with the pass that checks its ICRC, and on
// success fills the GRH area and wc. The ICRC is first tried with the IP
// ID the segment most likely has (one more than the last one's), so that
// solving for it is free.
func (c *recvCQ) acceptCopied(d []byte, e rqEntry, wc *verbs.WC) roce.DropReason {
	q, g := c.q, &c.gro
	n := len(d)
	h := &c.hd
	if r := roce.DecodeHeaders(d[:min(n, roce.HdrSize)], n, h); r != roce.Accepted {
		return r
	}
	hl := roce.HdrSize
	if h.HasImm() {
		h.Imm = binary.BigEndian.Uint32(d[roce.HdrSize:])
		hl = roce.MaxHdrSize
	}
	if r := c.forUs(h, g.sock, g.meta.dst); r != roce.Accepted {
		return r
	}
	body := e.buf[verbs.GRHSize:]
	plen := h.PayloadLen(n)
	if plen > len(body) {
		return roce.DropTooLong
	}
	name := &c.names[g.slot]
	src := name.Addr
	if q.blockSelf && h.SrcQPN == q.qpn && src == q.unicast {
		return roce.DropSelf
	}
	guess := g.run.id
	crc := c.icrc.Start(src, g.meta.dst, guess, true, ntohs(name.Port), roce.UDPPort, roce.UDPHdrSize+n, d)
	crc = roce.CRCUpdate(crc, d[roce.HdrSize:hl])
	crc = roce.CRCCopy(crc, body, d[hl:hl+plen])
	crc = roce.CRCUpdate(crc, d[hl+plen:n-roce.ICRCSize])
	x, dfFlipped, ok := roce.SolveTabFor(roce.UDPHdrSize + n).Solve(crc ^ binary.LittleEndian.Uint32(d[n-roce.ICRCSize:]))
	if !ok {
		return roce.DropBadICRC
	}
	id := x ^ guess
	g.run.id = id + 1
	c.accepted(e, wc, h, &g.meta, src, id, !dfFlipped, n, plen)
	return roce.Accepted
}

// groSeg is the segment size in a UDP_GRO control message in b, or 0.
func groSeg(b []byte) int {
	var m rxMeta
	parseCmsgs(b, &m)
	return m.seg
}
