//go:build linux

package soft

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/roce"
	"github.com/go-rdma/rdmanet/internal/verbs"
)

// The send queue: PostSend builds each WR's datagram (headers, pad,
// ICRC) into per-slot scratch, cuts the batch into GSO runs and sends it
// with sendmmsg, or a lone datagram with sendto.

// sendQueue holds the per-slot scratch of a sendmmsg batch: one slot per
// send queue entry. Sends complete synchronously, so the ring is reused by
// every batch.
//
// A run of datagrams to one destination with one length (the last may be
// shorter) goes out as one UDP GSO message (UDP_SEGMENT): the kernel walks
// its stack once for the run and cuts it into datagrams as late as it can
// (on loopback and veth, at the receiving socket). Segment j of a run gets
// IP ID j (the run's skb has ID 0, DF set, unconnected socket, and GSO
// numbers the segments from there), so its ICRC is sealed with that ID.
type sendQueue struct {
	mu     sync.Mutex
	closed bool
	psn    uint32 // the next WR's PSN, 24 bits (psnMask)
	hdr    [][roce.MaxHdrSize]byte
	tail   []sendTail
	iov    [][3]unix.Iovec
	names  []unix.RawSockaddrInet4
	msgs   []mmsghdr // one datagram per slot
	status []verbs.WCStatus
	errno  []unix.Errno // why a slot's send failed
	icrc   roce.FlowICRC

	gso     bool       // UDP_SEGMENT works on this socket
	segID   []uint16   // each slot's IP ID (its index in its run)
	dlen    []int      // each slot's UDP payload length
	dst     [][4]byte  // each slot's destination address
	runs    []int      // the first slot of each run of the batch
	slotIdx []int      // 0, 1, ... depth: runs of one slot each
	gmsgs   []mmsghdr  // one message per run
	gctrl   [][24]byte // each run's UDP_SEGMENT cmsg
	flat    []byte     // a lone datagram, gathered for sendto
	// maxScratch is the most slots the scratch above grows to.
	maxScratch int
}

// sendTail is what follows a datagram's payload: its pad (at most 3
// bytes) and its ICRC.
type sendTail [8]byte

// psnMask keeps a PSN to the BTH's 24 bits.
const psnMask = 0xFFFFFF

// init makes the send queue with a scratch of firstScratch slots; a post
// of more WRs grows it (grow), up to sendScratch, and a post of more than
// that goes out in batches of sendScratch.
func (s *sendQueue) init(q *QP, depth int) error {
	s.psn = rand.Uint32() & psnMask // a random first PSN
	s.maxScratch = min(depth, sendScratch)
	s.flat = make([]byte, roce.MaxHdrSize+q.mtu+len(sendTail{}))
	s.grow(min(s.maxScratch, firstScratch))
	// A kernel without UDP GSO (before 4.18) refuses the option.
	s.gso = unix.SetsockoptInt(q.uniFd, unix.SOL_UDP, unix.UDP_SEGMENT, 0) == nil
	return nil
}

// grow makes the send scratch n slots; no post is in progress.
func (s *sendQueue) grow(n int) {
	s.hdr = make([][roce.MaxHdrSize]byte, n)
	s.tail = make([]sendTail, n)
	s.iov = make([][3]unix.Iovec, n)
	s.names = make([]unix.RawSockaddrInet4, n)
	s.msgs = make([]mmsghdr, n)
	s.status = make([]verbs.WCStatus, n)
	s.errno = make([]unix.Errno, n)
	s.segID = make([]uint16, n)
	s.dlen = make([]int, n)
	s.dst = make([][4]byte, n)
	s.runs = make([]int, 0, n+1)
	s.slotIdx = make([]int, n+1)
	for i := range s.slotIdx {
		s.slotIdx[i] = i
	}
	s.gmsgs = make([]mmsghdr, n)
	s.gctrl = make([][24]byte, n)
	for i := range s.msgs {
		s.names[i].Family = unix.AF_INET
		s.names[i].Port = htons(roce.UDPPort)
		m := &s.msgs[i].Hdr
		m.Name = (*byte)(unsafe.Pointer(&s.names[i]))
		m.Namelen = unix.SizeofSockaddrInet4
		m.Iov = &s.iov[i][0]
		m.SetIovlen(3)
	}
}

// PollPostSend polls the send CQ and then posts (see verbs.QP): in this
// provider both are plain calls, so it is the two in turn.
func (q *QP) PollPostSend(wcs []verbs.WC, wrs []verbs.SendWR) (int, int, error) {
	return verbs.PollThenPost(q, wcs, wrs)
}

// PostSend builds each WR's headers and ICRC into its slot and sends the
// batch with sendmmsg from the QP's unicast socket. Sends complete
// synchronously: a signaled WR's completion is on the send CQ when
// PostSend returns. A WR whose payload exceeds the MTU fails with
// verbs.ErrMessageSize, one that finds the send CQ full with
// verbs.ErrQueueFull; nothing from that WR on is posted.
//
// The kernel's send errors are never lost. A single WR (len(wrs) == 1)
// the kernel refuses (EMSGSIZE, ENETUNREACH, EPERM, ENOBUFS, ...) is not
// posted: PostSend returns 0 and the error, wrapping
// *os.SyscallError{"sendto", errno}. A WR of a batch the kernel refuses
// completes with WCGeneralErr and WC.Errno, signaled or not. A full socket
// buffer (EAGAIN) is waited out.
func (q *QP) PostSend(wrs []verbs.SendWR) (int, error) {
	s := &q.sq
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := q.usable("ibv_post_send", s.closed); err != nil {
		return 0, err
	}
	if q.fault.err.Load() {
		return q.flushSends(wrs) // the error state: reset.go
	}
	posted := 0
	for posted < len(wrs) {
		batch := wrs[posted:]
		k, err := q.prepare(batch)
		if k > 0 {
			if err := q.transmit(batch[:k], len(wrs) == 1); err != nil {
				return posted, fmt.Errorf("soft: ibv_post_send: %w", err)
			}
			posted += k
		}
		if err != nil {
			return posted, fmt.Errorf("soft: ibv_post_send: %w", err)
		}
	}
	return posted, nil
}

// prepare fills slots for up to len(slots) WRs and returns how many; err
// says why the next one could not be. Each WR's headers go into its slot
// (encode), the batch is cut into GSO runs (roce.CutRuns), then each datagram
// is sealed with the ICRC for the IP ID its place in its run gives it
// (seal).
func (q *QP) prepare(wrs []verbs.SendWR) (int, error) {
	s := &q.sq
	if len(wrs) > len(s.msgs) && len(s.msgs) < s.maxScratch {
		s.grow(min(max(len(wrs), 2*len(s.msgs)), s.maxScratch))
	}
	room := -1 // the send CQ's room, asked for at the first signaled WR
	k := min(len(wrs), len(s.msgs))
	var err error
	for i := range k {
		if err = q.encode(i, &wrs[i], &room); err != nil {
			k = i
			break
		}
	}
	s.runs = roce.CutRuns(s.runs[:0], s.segID[:k], s.dst[:k], s.dlen[:k], s.gso)
	for i := range k {
		q.seal(i, k == 1)
	}
	return k, err
}

// encode checks WR i and fills slot i with its headers, destination and
// iovecs (headers, payload, pad and ICRC); room is the send CQ's room for
// signaled WRs, -1 until a signaled WR asks for it (most WRs are not, and
// need not take the CQ's lock).
func (q *QP) encode(i int, wr *verbs.SendWR, room *int) error {
	s := &q.sq
	a, ok := wr.AH.(*ah)
	if !ok || a == nil || a.qp != q {
		return fmt.Errorf("WR %d: AH not created on this QP", i)
	}
	if a.closed.Load() {
		return fmt.Errorf("WR %d: AH closed: %w", i, verbs.ErrClosed)
	}
	payload := wr.Inline
	if payload == nil || wr.Flags&verbs.SendInline == 0 {
		var err error
		if payload, err = q.sgeBytes(wr.SGE); err != nil {
			return fmt.Errorf("WR %d: %w", i, err)
		}
	}
	if len(payload) > q.mtu {
		return fmt.Errorf("WR %d: %d bytes over MTU %d: %w", i, len(payload), q.mtu, verbs.ErrMessageSize)
	}
	if wr.Flags&verbs.SendSignaled != 0 {
		if *room < 0 {
			*room = q.scq.room()
		}
		if *room == 0 {
			return fmt.Errorf("WR %d: send CQ full: %w", i, verbs.ErrQueueFull)
		}
		*room--
	}
	h := roce.Header{
		Opcode:  roce.OpUDSendOnly,
		SE:      wr.Flags&verbs.SendSolicited != 0,
		PadCnt:  uint8(roce.PadFor(len(payload))),
		PKey:    verbs.DefaultPKey,
		DestQPN: wr.RemoteQPN,
		PSN:     s.psn,
		QKey:    wr.RemoteQKey,
		SrcQPN:  q.qpn,
	}
	if h.QKey&0x80000000 != 0 { // the QP's own Q_Key, as verbs does
		h.QKey = q.qkey
	}
	if wr.Flags&verbs.SendWithImm != 0 {
		h.Opcode = roce.OpUDSendOnlyImm
		h.Imm = wr.Imm
	}
	hl := h.Encode(s.hdr[i][:])
	pad := int(h.PadCnt)
	tail := s.tail[i][:pad+roce.ICRCSize]
	clear(tail[:pad])
	s.dlen[i] = hl + len(payload) + pad + roce.ICRCSize
	s.dst[i] = a.dst
	s.names[i].Addr = a.dst
	setIov(&s.iov[i][0], s.hdr[i][:hl])
	setIov(&s.iov[i][1], payload)
	setIov(&s.iov[i][2], tail)
	s.status[i], s.errno[i] = verbs.WCSuccess, 0
	s.psn = (s.psn + 1) & psnMask
	return nil
}

// seal writes slot i's ICRC, for the IP ID segID[i]. A lone datagram's
// payload is copied into flat with the pass that seals it (sendFlat sends
// it from there).
func (q *QP) seal(i int, lone bool) {
	s := &q.sq
	hl := int(s.iov[i][0].Len)
	payload := iovBytes(s.iov[i][1])
	tail := iovBytes(s.iov[i][2])
	pad := len(tail) - roce.ICRCSize
	crc := s.icrc.Start(q.unicast, s.dst[i], s.segID[i], true, roce.UDPPort, roce.UDPPort, roce.UDPHdrSize+s.dlen[i], s.hdr[i][:])
	crc = crc32.Update(crc, crc32.IEEETable, s.hdr[i][roce.HdrSize:hl]) // ImmDt, if any
	if lone {
		dst := s.flat[roce.MaxHdrSize : roce.MaxHdrSize+len(payload)]
		crc = roce.CRCCopy(crc, dst, payload)
		setIov(&s.iov[i][1], dst)
	} else {
		crc = roce.CRCUpdate(crc, payload)
	}
	crc = crc32.Update(crc, crc32.IEEETable, tail[:pad])
	binary.LittleEndian.PutUint32(tail[pad:], crc)
}

// iovBytes is the memory an iovec points at.
func iovBytes(v unix.Iovec) []byte { return unsafe.Slice(v.Base, v.Len) }

// transmit sends the prepared slots, a message per run, and completes the
// WRs. For a lone WR (alone) that the kernel refused it queues no
// completion and returns the error instead.
func (q *QP) transmit(wrs []verbs.SendWR, alone bool) error {
	s := &q.sq
	nr := len(s.runs)
	s.runs = append(s.runs, len(wrs))
	for r := range nr {
		first, n := s.runs[r], s.runs[r+1]-s.runs[r]
		g := &s.gmsgs[r]
		g.Hdr = s.msgs[first].Hdr
		g.Hdr.SetIovlen(3 * n)
		if n > 1 {
			c := s.gctrl[r][:]
			h := (*unix.Cmsghdr)(unsafe.Pointer(&c[0]))
			h.Level, h.Type = unix.SOL_UDP, unix.UDP_SEGMENT
			seg := uint16(s.dlen[first]) // UDP_SEGMENT's data: the segment size, a u16
			h.SetLen(unix.CmsgLen(int(unsafe.Sizeof(seg))))
			*(*uint16)(unsafe.Pointer(&c[unix.CmsgLen(0)])) = seg
			g.Hdr.Control = &c[0]
			g.Hdr.SetControllen(unix.CmsgSpace(int(unsafe.Sizeof(seg))))
		}
	}
	q.send(s.gmsgs[:nr], s.runs)
	if q.selfFilter {
		q.noteSelfLooped(len(wrs))
	}
	for i := range wrs {
		s.iov[i][1] = unix.Iovec{} // keep no caller's inline buffer alive
	}
	if alone && s.status[0] != verbs.WCSuccess {
		return os.NewSyscallError("sendto", s.errno[0])
	}
	locked := false // the send CQ's lock, taken for the first completion
	for i := range wrs {
		if wrs[i].Flags&verbs.SendSignaled != 0 || s.status[i] != verbs.WCSuccess {
			if !locked {
				q.scq.mu.Lock()
				locked = true
			}
			q.scq.push(verbs.WC{WRID: wrs[i].WRID, Status: s.status[i], Opcode: verbs.WCSend, QPN: q.qpn, Errno: uint32(s.errno[i])})
		}
	}
	if locked {
		q.scq.mu.Unlock()
	}
	return nil
}

// sendRuns is sendmmsg; tests replace it to make the kernel refuse GSO.
var sendRuns = sendmmsg

// send sends msgs, msgs[r] carrying slots [runs[r], runs[r+1]), and
// records what became of each slot: a run the route cannot take as GSO (a
// device without checksum offload, an MTU or size limit the run does not
// fit) is sent again one datagram at a time and the QP stops making runs;
// any other error (ENOBUFS included: the kernel dropped it) fails the
// run's WRs with that errno. A full socket buffer is waited out by
// sendmmsg and sendto.
func (q *QP) send(msgs []mmsghdr, runs []int) {
	s := &q.sq
	for r := 0; r < len(msgs); {
		var sent int
		var err error
		if r == len(msgs)-1 && runs[r+1]-runs[r] == 1 {
			sent, err = q.sendFlat(&msgs[r])
		} else {
			sent, err = sendRuns(q.uniFd, msgs[r:], 0)
		}
		if err == nil {
			r += sent
			continue
		}
		first, last := runs[r], runs[r+1]
		switch {
		case err == unix.EINTR:
			continue
		case last-first > 1 && (err == unix.EIO || err == unix.EINVAL || err == unix.EOPNOTSUPP || err == unix.EMSGSIZE):
			s.gso = false
			q.resealAlone(first, last)
			q.send(s.msgs[first:last], s.slotIdx[first:last+1])
		default:
			errno, _ := err.(unix.Errno)
			if errno == 0 {
				errno = unix.EIO
			}
			for i := first; i < last; i++ {
				s.status[i], s.errno[i] = verbs.WCGeneralErr, errno
			}
		}
		r++
	}
}

// sendFlat sends the one datagram m carries with sendto from a contiguous
// copy: for a lone datagram, gathering it here costs less than the
// kernel's reading a msghdr and importing its iovecs (a 4 KiB copy
// included). It returns 1 or an error, as sendmmsg would.
//
// The headers go just before flat[maxHdrSize:], where the payload starts;
// a payload prepare already copied there stays.
func (q *QP) sendFlat(m *mmsghdr) (int, error) {
	flat := q.sq.flat
	iov := unsafe.Slice(m.Hdr.Iov, m.Hdr.Iovlen)
	start := roce.MaxHdrSize - int(iov[0].Len)
	n := start
	for _, v := range iov {
		if v.Len > 0 && v.Base != &flat[n] {
			copy(flat[n:], unsafe.Slice(v.Base, v.Len))
		}
		n += int(v.Len)
	}
	return 1, sendto(q.uniFd, flat[start:n], m.Hdr.Name)
}

// resealAlone reseals the ICRC of the slots in [first, last) sealed as
// later segments of a run, for the IP ID 0 they get sent alone.
func (q *QP) resealAlone(first, last int) {
	s := &q.sq
	for i := first; i < last; i++ {
		if id := s.segID[i]; id != 0 {
			tail := s.iov[i][2]
			icrc := unsafe.Slice(tail.Base, tail.Len)[tail.Len-roce.ICRCSize:]
			fix := roce.IDDelta(roce.UDPHdrSize+s.dlen[i], id)
			binary.LittleEndian.PutUint32(icrc, binary.LittleEndian.Uint32(icrc)^fix)
			s.segID[i] = 0
		}
	}
}
