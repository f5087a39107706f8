//go:build linux

package soft_test

import (
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/roce"
	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/internal/verbs/soft"
)

// recvRig is two software QPs on lo, one reading control messages and
// one created with GRHAddressesOnly (bare reads), taking the inputs in
// turn. Each has one receive posted at a time, in turn in place (room
// past GRH + MTU) and scattered (exactly GRH + MTU), each followed by
// guard bytes. A plain UDP socket throws datagrams at the QPs' unicast
// addresses. One per fuzzing process.
type recvRig struct {
	qps   [2]rigQP
	cur   int // the QP taking this input
	fd    int
	sport uint16
	mtu   int
	wcs   [4]verbs.WC
	err   error
}

type rigQP struct {
	qp     *soft.QP
	arena  *verbs.Arena
	mr     verbs.MR
	mtu    int
	posted bool
	layout int // of the posted buffer: 0 in place, 1 scattered
	next   int
}

const (
	rigSlack = 4 + 3 + 4 // ImmDt, pad, ICRC: what in place needs past GRH + MTU
	rigGuard = 64
)

var (
	rigOnce sync.Once
	rig     recvRig
)

func (r *recvRig) setup() error {
	p, err := verbs.Lookup(verbs.Software)
	if err != nil {
		return err
	}
	for i := range r.qps {
		id, err := p.Bind(verbs.BindConfig{}) // an ID has one QP
		if err != nil {
			return err
		}
		r.mtu = id.Local().MTU
		q, err := id.CreateQP(verbs.QPConfig{GRHAddressesOnly: i == 1})
		if err != nil {
			return err
		}
		v := &r.qps[i]
		v.qp, v.mtu = q.(*soft.QP), r.mtu
		if v.arena, err = verbs.NewArena(verbs.GRHSize + r.mtu + rigSlack + rigGuard); err != nil {
			return err
		}
		if v.mr, err = q.RegisterMemory(v.arena); err != nil {
			return err
		}
	}
	// DF set on an unconnected socket: IP ID 0, as the ICRC below assumes.
	if r.fd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err != nil {
		return err
	}
	if err = unix.SetsockoptInt(r.fd, unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO); err != nil {
		return err
	}
	if err = unix.Bind(r.fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return err
	}
	sa, err := unix.Getsockname(r.fd)
	if err != nil {
		return err
	}
	r.sport = uint16(sa.(*unix.SockaddrInet4).Port)
	return nil
}

func (r *rigQP) size() int {
	if r.layout == 0 {
		return verbs.GRHSize + r.mtu + rigSlack
	}
	return verbs.GRHSize + r.mtu
}

// post posts the buffer in the next layout with poisoned guard bytes.
func (r *rigQP) post(t *testing.T) {
	r.layout = r.next % 2
	r.next++
	region := r.arena.Slice(0, uint32(verbs.GRHSize+r.mtu+rigSlack+rigGuard))
	for i := range region {
		region[i] = 0xA5
	}
	_, err := r.qp.PostRecv([]verbs.RecvWR{{WRID: 1, SGE: verbs.SGE{Length: uint32(r.size()), LKey: r.mr.LKey()}}})
	if err != nil {
		t.Fatal(err)
	}
	r.posted = true
}

// guardIntact reports whether nothing past the posted buffer was written.
func (r *rigQP) guardIntact() bool {
	region := r.arena.Slice(0, uint32(verbs.GRHSize+r.mtu+rigSlack+rigGuard))
	for _, b := range region[r.size():] {
		if b != 0xA5 {
			return false
		}
	}
	return true
}

func dropTotal(d soft.Drops) uint64 {
	return d.Truncated + d.BadTVer + d.BadOpcode + d.BadPKey + d.BadQKey + d.BadICRC +
		d.BadPad + d.NotForUs + d.TooLong + d.Self + d.Overflow
}

// FuzzReceive throws each input at a software QP's unicast socket as a
// UDP datagram and polls the QP, so the whole receive path runs on real
// sockets: recvmsg into a posted buffer in place or scattered, header
// checks, the ICRC solved for the IP ID, the GRH written. flags bit 0
// seals a correct ICRC, bit 1 aims the datagram at the QP (destination
// QPN and Q_Key), so that inputs also get accepted. Every datagram must
// end as exactly one completion or one counted drop; an accepted one must
// carry what Decode finds in it, and nothing may be written past the
// posted buffer.
func FuzzReceive(f *testing.F) {
	for i, plen := range []int{0, 1, 29, 1024, 4096, 4097} {
		h := roce.Header{Opcode: roce.OpUDSendOnly, PKey: 0xFFFF, DestQPN: 2, PSN: uint32(i), QKey: 1, SrcQPN: 42}
		if i%2 == 1 {
			h.Opcode, h.Imm = roce.OpUDSendOnlyImm, 0xC0FFEE
		}
		h.PadCnt = uint8(roce.PadFor(plen))
		d := make([]byte, h.Len()+plen+int(h.PadCnt)+roce.ICRCSize)
		n := h.Encode(d)
		for j := range plen {
			d[n+j] = byte(j)
		}
		f.Add(byte(3), d)
		f.Add(byte(1), d)
	}
	f.Add(byte(0), []byte{})
	f.Add(byte(3), []byte{0x64, 0, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, flags byte, in []byte) {
		rigOnce.Do(func() { rig.err = rig.setup() })
		if rig.err != nil {
			t.Fatalf("rig: %v", rig.err)
		}
		q := &rig.qps[rig.cur]
		rig.cur ^= 1
		r := struct {
			*rigQP
			fd    int
			sport uint16
			wcs   []verbs.WC
		}{q, rig.fd, rig.sport, rig.wcs[:]}
		d := append([]byte(nil), in[:min(len(in), r.mtu+64)]...)
		uni := r.qp.UnicastIP()
		if flags&2 != 0 && len(d) >= 20 {
			d[5], d[6], d[7] = byte(r.qp.QPN()>>16), byte(r.qp.QPN()>>8), byte(r.qp.QPN())
			binary.BigEndian.PutUint32(d[12:], r.qp.QKey())
		}
		if flags&1 != 0 && len(d) >= 16 {
			sealICRC(d, uni, r.sport, true) // too short for an ICRC: left as it is
		}
		if !r.posted {
			r.post(t)
		}
		before := dropTotal(r.qp.Drops())
		if err := unix.Sendto(r.fd, d, 0, &unix.SockaddrInet4{Port: roce.UDPPort, Addr: uni}); err != nil {
			t.Fatalf("sendto: %v", err)
		}
		var n int
		var dropped uint64
		for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
			var err error
			n, err = r.qp.RecvCQ().Poll(r.wcs)
			if err != nil {
				t.Fatal(err)
			}
			dropped = dropTotal(r.qp.Drops()) - before
			if n > 0 || dropped > 0 {
				break
			}
		}
		if n+int(dropped) != 1 {
			t.Fatalf("%d completions and %d drops for one datagram of %d bytes (layout %d, GRHAddressesOnly %v)", n, dropped, len(d), r.layout, q == &rig.qps[1])
		}
		if !r.guardIntact() {
			t.Fatalf("bytes past the posted buffer written (layout %d, %d-byte datagram)", r.layout, len(d))
		}
		var h roce.Header
		payload, why := roce.Decode(d, &h)
		if n == 0 {
			// Dropped: the buffer stays posted. A datagram sealed and aimed
			// at the QP, whose headers Decode takes and whose payload fits,
			// must not be.
			if flags&3 == 3 && why == roce.Accepted && len(payload) <= r.mtu {
				t.Fatalf("a good datagram (%d-byte payload, layout %d) was dropped: %+v", len(payload), r.layout, r.qp.Drops())
			}
			return
		}
		r.posted = false
		wc := r.wcs[0]
		if why != roce.Accepted {
			t.Fatalf("the QP accepted what Decode drops (%v)", why)
		}
		buf := r.arena.Slice(0, wc.ByteLen)
		if wc.Status != verbs.WCSuccess || int(wc.ByteLen) != verbs.GRHSize+len(payload) {
			t.Fatalf("completion %+v for a %d-byte payload", wc, len(payload))
		}
		if got := buf[verbs.GRHSize:]; string(got) != string(payload) {
			t.Fatalf("payload differs (layout %d): %s", r.layout, firstDiff(got, payload))
		}
		if h.HasImm() != (wc.Flags&verbs.WCWithImm != 0) || (h.HasImm() && wc.Imm != h.Imm) {
			t.Fatalf("immediate: completion %+v, header %+v", wc, h)
		}
		if got := [4]byte(buf[32:36]); got != [4]byte{127, 0, 0, 1} {
			t.Fatalf("GRH source %v", got)
		}
	})
}

func firstDiff(a, b []byte) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("byte %d: %#x, want %#x", i, a[i], b[i])
		}
	}
	return fmt.Sprintf("lengths %d and %d", len(a), len(b))
}

// groRig is a software QP on lo with groSlots receive buffers, each
// followed by guard bytes, for FuzzCoalesced. One per fuzzing process.
type groRigT struct {
	qp    *soft.QP
	arena *verbs.Arena
	mr    verbs.MR
	mtu   int
	err   error
}

const groSlots = 64

var (
	groRigOnce sync.Once
	groRig     groRigT
)

func (r *groRigT) slot() int { return verbs.GRHSize + r.mtu + rigSlack + rigGuard }

// size is buffer i's posted size: in turn exactly GRH + MTU and with room
// past it.
func (r *groRigT) size(i int) int {
	if i%2 == 0 {
		return verbs.GRHSize + r.mtu
	}
	return verbs.GRHSize + r.mtu + rigSlack
}

func (r *groRigT) setup() error {
	p, err := verbs.Lookup(verbs.Software)
	if err != nil {
		return err
	}
	id, err := p.Bind(verbs.BindConfig{})
	if err != nil {
		return err
	}
	r.mtu = id.Local().MTU
	q, err := id.CreateQP(verbs.QPConfig{RecvDepth: groSlots, GRO: true})
	if err != nil {
		return err
	}
	r.qp = q.(*soft.QP)
	if r.arena, err = verbs.NewArena(groSlots * r.slot()); err != nil {
		return err
	}
	r.mr, err = q.RegisterMemory(r.arena)
	return err
}

// post posts buffer i, poisoned.
func (r *groRigT) post(t *testing.T, i int) {
	b := r.arena.Slice(uint32(i*r.slot()), uint32(r.slot()))
	for j := range b {
		b[j] = 0xA5
	}
	_, err := r.qp.PostRecv([]verbs.RecvWR{{WRID: uint64(i), SGE: verbs.SGE{Offset: uint32(i * r.slot()), Length: uint32(r.size(i)), LKey: r.mr.LKey()}}})
	if err != nil {
		t.Fatal(err)
	}
}

func (r *groRigT) guardIntact(i int) bool {
	b := r.arena.Slice(uint32(i*r.slot()), uint32(r.slot()))
	for _, v := range b[r.size(i):] {
		if v != 0xA5 {
			return false
		}
	}
	return true
}

// FuzzCoalesced puts each input before a software QP as one coalesced
// read with segment size seg, as the kernel returns a run with UDP_GRO,
// so the splitter and the copy path run on hostile reads: flags bit 0
// seals each datagram's ICRC, bit 1 aims each at the QP. Every datagram
// the read splits into must end as exactly one completion or one counted
// drop, in order; an accepted one must carry what Decode finds in it, and
// nothing may be written past a posted buffer.
func FuzzCoalesced(f *testing.F) {
	for _, tc := range []struct {
		n, plen int
	}{{4, 64}, {3, 1024}, {2, 4096}, {5, 0}} {
		var read []byte
		var seg int
		for j := range tc.n {
			h := roce.Header{Opcode: roce.OpUDSendOnly, PKey: 0xFFFF, DestQPN: 2, PSN: uint32(j), QKey: 1, SrcQPN: 42}
			if j%2 == 1 {
				h.Opcode, h.Imm = roce.OpUDSendOnlyImm, 7
			}
			plen := tc.plen
			if j == tc.n-1 {
				plen /= 2
			}
			h.PadCnt = uint8(roce.PadFor(plen))
			d := make([]byte, h.Len()+plen+int(h.PadCnt)+roce.ICRCSize)
			h.Encode(d)
			if j == 0 {
				seg = len(d)
			}
			read = append(read, d...)
		}
		f.Add(byte(3), uint16(seg), read)
		f.Add(byte(1), uint16(seg-1), read)
	}
	f.Add(byte(3), uint16(0), []byte{})
	f.Add(byte(3), uint16(1), []byte{0x64, 0, 0xff, 0xff, 0, 0, 0})
	f.Fuzz(func(t *testing.T, flags byte, seg uint16, in []byte) {
		groRigOnce.Do(func() { groRig.err = groRig.setup() })
		r := &groRig
		if r.err != nil {
			t.Fatalf("rig: %v", r.err)
		}
		read := append([]byte(nil), in[:min(len(in), 1<<16)]...)
		// The datagrams the read must split into.
		var dgrams [][]byte
		for off := 0; off < len(read); {
			end := len(read)
			if seg > 0 {
				end = min(off+int(seg), end)
			}
			dgrams = append(dgrams, read[off:end])
			off = end
		}
		uni := r.qp.UnicastIP()
		const sport = 0xC0DE
		for _, d := range dgrams {
			if flags&2 != 0 && len(d) >= 20 {
				d[5], d[6], d[7] = byte(r.qp.QPN()>>16), byte(r.qp.QPN()>>8), byte(r.qp.QPN())
				binary.BigEndian.PutUint32(d[12:], r.qp.QKey())
			}
			if flags&1 != 0 && len(d) >= 16 {
				sealICRC(d, uni, sport, true)
			}
		}
		wants := make([][]byte, len(dgrams)) // what Decode finds: the payload, or nil
		for j, d := range dgrams {
			var h roce.Header
			if p, why := roce.Decode(d, &h); why == roce.Accepted {
				wants[j] = p
			}
		}
		for i := range groSlots {
			r.post(t, i)
		}
		before := dropTotal(r.qp.Drops())
		if err := soft.InjectCoalesced(r.qp, 1, read, int(seg), [4]byte{127, 0, 0, 1}, sport, uni); err != nil {
			t.Fatal(err)
		}
		var wcs [groSlots]verbs.WC
		done := 0 // datagrams ended as a completion or a drop
		next := 0 // the datagram the next completion may be
		for range len(dgrams) + 2 {
			n, err := r.qp.RecvCQ().Poll(wcs[:])
			if err != nil {
				t.Fatal(err)
			}
			for _, wc := range wcs[:n] {
				i := int(wc.WRID)
				if !r.guardIntact(i) {
					t.Fatalf("bytes past posted buffer %d written", i)
				}
				payload := r.arena.Slice(uint32(i*r.slot()+verbs.GRHSize), wc.ByteLen-verbs.GRHSize)
				for next < len(dgrams) && (wants[next] == nil || string(wants[next]) != string(payload)) {
					next++ // dropped: a datagram the QP accepted must be the next one Decode takes
				}
				if next == len(dgrams) {
					t.Fatalf("a completion (%d bytes) that is none of the read's datagrams in order", len(payload))
				}
				next++
				r.post(t, i)
			}
			done = n + done
			if n == 0 {
				break
			}
		}
		dropped := dropTotal(r.qp.Drops()) - before
		if done+int(dropped) != len(dgrams) {
			t.Fatalf("%d completions and %d drops for %d datagrams (seg %d, %d bytes)", done, dropped, len(dgrams), seg, len(read))
		}
		// Drain what was posted, so that the next input starts empty.
		soft.FlushRecvs(r.qp)
	})
}
