//go:build linux

package soft

import (
	"encoding/binary"

	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/roce"
	"github.com/go-rdma/rdmanet/internal/verbs"
)

// Accepting a read datagram: the checks (headers, destination, Q_Key,
// ICRC), its GRH area and completion, and the receive queue's fix-up.

// complete validates the got datagrams read into the first got posted
// buffers and fills wcs. With GRO (gro.go) the slots from the first one
// that was coalesced or spilled into its overflow on complete by copy, and
// what does not fit wcs or the posted receives stays pending.
func (c *recvCQ) complete(sock, got int, wcs []verbs.WC) int {
	first := got
	if c.gro.area != nil {
		first = c.firstCopied(got)
	}
	c.moveOut(first, got) // none when nothing is copied (first == got)
	n := c.completeInPlace(sock, first, wcs)
	if first < got {
		c.startCopied(sock, first, got)
		n += c.completeCopied(wcs[n:])
	}
	c.gro.release()
	c.groLearn(sock, first < got)
	return n
}

// completeInPlace validates the got datagrams that landed in the first got
// posted buffers, fills wcs and fixes the receive queue: consumed entries
// leave, the others go back to the front in order.
func (c *recvCQ) completeInPlace(sock, got int, wcs []verbs.WC) int {
	kept, n := 0, 0
	for i := range got {
		e := c.rq[wrap(c.head+i, len(c.rq))]
		r := c.accept(sock, i, e, &wcs[n])
		if r == roce.Accepted {
			n++
			continue
		}
		c.q.drops[r].Add(1)
		c.kept[kept] = e
		kept++
	}
	// Consume got entries, then put the kept ones back at the front.
	c.head = wrap(c.head+got, len(c.rq))
	c.n -= got
	for j := kept - 1; j >= 0; j-- {
		c.head = wrap(c.head-1+len(c.rq), len(c.rq))
		c.rq[c.head] = c.kept[j]
		c.n++
	}
	return n
}

// rxView is a received datagram scattered over the header scratch, the
// posted buffer past its GRH area and the tail scratch.
type rxView struct{ s [3][]byte }

// crc updates crc with bytes [from, to) of the datagram, from <= to: of
// each part, what of the range lies in it (nothing, for a part before
// or past it).
func (v *rxView) crc(crc uint32, from, to int) uint32 {
	for _, s := range v.s {
		crc = roce.CRCUpdate(crc, s[min(from, len(s)):min(to, len(s))])
		from = max(from-len(s), 0)
		to = max(to-len(s), 0)
	}
	return crc
}

// copyOut copies len(dst) bytes at from to dst (memmove semantics within
// one segment).
func (v *rxView) copyOut(dst []byte, from int) {
	for _, s := range v.s {
		if len(dst) == 0 {
			return
		}
		if from < len(s) {
			k := copy(dst, s[from:])
			dst = dst[k:]
			from = 0
			continue
		}
		from -= len(s)
	}
}

// forUs checks a datagram's destination QP (this QP, or a group the QP
// receives from on the multicast socket) and Q_Key.
func (c *recvCQ) forUs(h *roce.Header, sock int, dst [4]byte) roce.DropReason {
	switch {
	case h.DestQPN == c.q.qpn:
	case h.DestQPN == verbs.MulticastQPN && sock == 0:
		if g := c.findGroup(dst); g < 0 || c.groups[g].sendOnly {
			return roce.DropNotForUs
		}
	default:
		return roce.DropNotForUs
	}
	if h.QKey != c.q.qkey {
		return roce.DropBadQKey
	}
	return roce.Accepted
}

// checkICRC checks the ICRC of v (n bytes from src:sport to dst) and
// returns the IP ID and DF flag that make it match, which the socket
// does not show (see roce.SolveIPv4ID); ok is false when none does.
func (c *recvCQ) checkICRC(v *rxView, src [4]byte, sport uint16, dst [4]byte, n int) (id uint16, df, ok bool) {
	// Guess ID 0 with DF, as RoCEv2 senders send (rxe, NICs, this
	// backend): then the difference to solve is 0 and solving is free.
	crc := c.icrc.Start(src, dst, 0, true, sport, roce.UDPPort, roce.UDPHdrSize+n, v.s[0])
	crc = v.crc(crc, roce.HdrSize, n-roce.ICRCSize)
	var icrc [roce.ICRCSize]byte
	v.copyOut(icrc[:], n-roce.ICRCSize)
	id, dfFlipped, ok := roce.SolveTabFor(roce.UDPHdrSize + n).Solve(crc ^ binary.LittleEndian.Uint32(icrc[:]))
	return id, !dfFlipped, ok
}

// view is datagram i of n bytes, which landed in buf (and, scattered, in
// slot i's scratch), and its first hdrSize bytes.
func (c *recvCQ) view(i int, buf []byte, n int) (v rxView, hdr []byte) {
	if c.msgs[i].Hdr.Iov == &c.iov[i][3] { // in place: the datagram is whole from GRH-20
		v.s[0] = buf[verbs.GRHSize-roce.HdrSize:][:n]
		return v, v.s[0][:min(n, roce.HdrSize)]
	}
	body := buf[verbs.GRHSize:]
	v.s[0] = c.hdr[i][:min(n, roce.HdrSize)]
	rest := max(n-roce.HdrSize, 0)
	v.s[1] = body[:min(rest, len(body))]
	v.s[2] = c.tail[i][:rest-len(v.s[1])]
	return v, v.s[0]
}

// accept validates datagram i, which landed in e's buffer, and on success
// fills wc.
func (c *recvCQ) accept(sock, i int, e rqEntry, wc *verbs.WC) roce.DropReason {
	q := c.q
	m := &c.msgs[i]
	n := int(m.Len)
	meta := &c.meta
	if c.bare {
		*meta = rxMeta{dst: c.bareDst}
	} else {
		parseCmsgs(c.ctrl[i][:m.Hdr.Controllen], meta)
		if meta.hasOvfl {
			q.noteSockDrops(sock, meta.ovfl)
		}
	}
	if m.Hdr.Flags&unix.MSG_TRUNC != 0 {
		return roce.DropTooLong
	}
	body := e.buf[verbs.GRHSize:]
	v, hdr := c.view(i, e.buf, n)

	h := &c.hd
	if r := roce.DecodeHeaders(hdr, n, h); r != roce.Accepted {
		return r
	}
	if h.HasImm() {
		var imm [roce.ImmDtSize]byte
		v.copyOut(imm[:], roce.HdrSize)
		h.Imm = binary.BigEndian.Uint32(imm[:])
	}
	if r := c.forUs(h, sock, meta.dst); r != roce.Accepted {
		return r
	}
	plen := h.PayloadLen(n)
	if plen > len(body) {
		return roce.DropTooLong
	}
	src := c.names[i].Addr
	// Own multicast looped back by the kernel is dropped before the ICRC
	// is computed: a sender that also receives (a reliable conn, for its
	// NAKs) would otherwise check every datagram it sent.
	if q.blockSelf && h.SrcQPN == q.qpn && src == q.unicast {
		return roce.DropSelf
	}
	id, df, ok := c.checkICRC(&v, src, ntohs(c.names[i].Port), meta.dst, n)
	if !ok {
		return roce.DropBadICRC
	}
	c.gro.seen = c.gro.seen || id != 0 // a later segment of a run (gro.go)
	if h.HasImm() {
		v.copyOut(body[:plen], roce.MaxHdrSize)
	}
	c.accepted(e, wc, h, meta, src, id, df, n, plen)
	return roce.Accepted
}

// accepted fills, for a datagram of n bytes (plen of payload) that passed
// every check, the GRH area of e's buffer and its completion.
func (c *recvCQ) accepted(e rqEntry, wc *verbs.WC, h *roce.Header, meta *rxMeta, src [4]byte, id uint16, df bool, n, plen int) {
	roce.FillGRH(e.buf[:verbs.GRHSize], src, meta.dst, meta.tos, meta.ttl, id, df, n)
	*wc = verbs.WC{
		WRID:    e.wrid,
		Status:  verbs.WCSuccess,
		Opcode:  verbs.WCRecv,
		Flags:   verbs.WCGRH,
		ByteLen: uint32(verbs.GRHSize + plen),
		QPN:     c.q.qpn,
		SrcQP:   h.SrcQPN,
	}
	if h.HasImm() {
		wc.Flags |= verbs.WCWithImm
		wc.Imm = h.Imm
	}
}
