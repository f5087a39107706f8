//go:build linux

package soft_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/roce"
	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/internal/verbs/soft"
)

// rawSender is a plain UDP socket on 127.0.0.1 that sends hand-made
// datagrams to groups on lo, with DF set (so IP ID 0).
type rawSender struct {
	fd    int
	sport uint16
	noDF  bool // datagrams sealed for DF clear (the socket's DF is on anyway)
}

func newRawSender(t *testing.T) *rawSender { return newRawSenderFrom(t, [4]byte{127, 0, 0, 1}) }

// newRawSenderFrom is newRawSender bound to src (a 127/8 address).
func newRawSenderFrom(t *testing.T, src [4]byte) *rawSender {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(fd) })
	require.NoError(t, unix.Bind(fd, &unix.SockaddrInet4{Addr: src}))
	lo, err := net.InterfaceByName("lo")
	require.NoError(t, err)
	require.NoError(t, unix.SetsockoptIPMreqn(fd, unix.IPPROTO_IP, unix.IP_MULTICAST_IF,
		&unix.IPMreqn{Address: [4]byte{127, 0, 0, 1}, Ifindex: int32(lo.Index)}))
	require.NoError(t, unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO))
	sa, err := unix.Getsockname(fd)
	require.NoError(t, err)
	return &rawSender{fd: fd, sport: uint16(sa.(*unix.SockaddrInet4).Port)}
}

// sealICRC writes into d's last 4 bytes the ICRC of d (BTH through ICRC)
// sent from 127.0.0.1:sport to dst:4791 in an IPv4 header with ID 0 and
// DF set or clear.
func sealICRC(d []byte, dst [4]byte, sport uint16, df bool) error {
	pkt := make([]byte, 28+len(d))
	pkt[0], pkt[9] = 0x45, unix.IPPROTO_UDP
	binary.BigEndian.PutUint16(pkt[2:], uint16(len(pkt)))
	if df {
		pkt[6] = 0x40
	}
	copy(pkt[12:], []byte{127, 0, 0, 1})
	copy(pkt[16:], dst[:])
	binary.BigEndian.PutUint16(pkt[20:], sport)
	binary.BigEndian.PutUint16(pkt[22:], roce.UDPPort)
	binary.BigEndian.PutUint16(pkt[24:], uint16(8+len(d)))
	copy(pkt[28:], d)
	crc, err := roce.ICRC(pkt)
	if err != nil {
		return err
	}
	binary.LittleEndian.PutUint32(d[len(d)-4:], crc)
	return nil
}

// datagram builds a UD SEND_ONLY datagram to group with a correct ICRC for
// an IPv4 header with ID 0 and DF.
func (r *rawSender) datagram(h roce.Header, payload []byte, group [4]byte) []byte {
	h.PadCnt = uint8(roce.PadFor(len(payload)))
	dg := make([]byte, h.Len()+len(payload)+int(h.PadCnt)+roce.ICRCSize)
	n := h.Encode(dg)
	copy(dg[n:], payload)
	if err := sealICRC(dg, group, r.sport, !r.noDF); err != nil {
		panic(err)
	}
	return dg
}

func (r *rawSender) send(t *testing.T, dg []byte, group [4]byte) {
	require.NoError(t, unix.Sendto(r.fd, dg, 0, &unix.SockaddrInet4{Port: roce.UDPPort, Addr: group}))
}

// TestRawBadPacketsDroppedAndCounted runs for a QP that reads control
// messages and for a GRHAddressesOnly one, whose reads of its one group's
// socket are bare.
func TestRawBadPacketsDroppedAndCounted(t *testing.T) {
	for _, only := range []bool{false, true} {
		t.Run(fmt.Sprintf("GRHAddressesOnly=%v", only), func(t *testing.T) { testRawBadPackets(t, only) })
	}
}

func testRawBadPackets(t *testing.T, addrOnly bool) {
	a := newEndpoint(t, verbs.QPConfig{GRHAddressesOnly: addrOnly})
	a.postRecvs(0, 16)
	a.join("239.201.9.1", false)
	group := [4]byte{239, 201, 9, 1}
	r := newRawSender(t)
	good := roce.Header{Opcode: roce.OpUDSendOnly, PKey: 0xFFFF, DestQPN: verbs.MulticastQPN, PSN: 1, QKey: verbs.DefaultQKey, SrcQPN: 0x4242}

	badQKey := good
	badQKey.QKey = 0x7777
	badPKey := good
	badPKey.PKey = 0x1234
	notForUs := good
	notForUs.DestQPN = a.qp.QPN() ^ 0x10
	badICRC := r.datagram(good, []byte("bad icrc"), group)
	badICRC[len(badICRC)-1] ^= 0x5A
	badTVer := r.datagram(good, []byte("tver"), group)
	badTVer[1] |= 2
	rc := r.datagram(good, []byte("rc"), group)
	rc[0] = 0x04 // RC SEND_ONLY

	for _, dg := range [][]byte{
		r.datagram(badQKey, []byte("bad qkey"), group),
		badICRC,
		r.datagram(badPKey, []byte("pkey"), group),
		r.datagram(notForUs, []byte("unicast QPN to a group"), group),
		badTVer,
		rc,
		{0x64, 0, 0xFF, 0xFF, 0, 0xFF},
		r.datagram(good, []byte("valid, from a plain UDP socket"), group),
	} {
		r.send(t, dg, group)
	}
	wcs := a.recv(1, 2*time.Second)
	require.Len(t, wcs, 1)
	assert.Equal(t, []byte("valid, from a plain UDP socket"), a.buf(wcs[0])[verbs.GRHSize:])
	assert.Equal(t, uint32(0x4242), wcs[0].SrcQP)
	assert.Empty(t, a.recv(1, 20*time.Millisecond))
	d := a.qp.Drops()
	assert.Equal(t, soft.Drops{BadQKey: 1, BadICRC: 1, BadPKey: 1, NotForUs: 1, BadTVer: 1, BadOpcode: 1, Truncated: 1}, d)
	assert.Equal(t, uint64(1), a.qp.DropCounts()[verbs.DropBadICRC])

	// Every dropped datagram left its buffer posted: 15 remain.
	for i := range 15 {
		r.send(t, r.datagram(good, []byte{byte(i)}, group), group)
	}
	assert.Len(t, a.recv(15, 2*time.Second), 15)
	_, err := a.qp.PostRecv([]verbs.RecvWR{{SGE: a.recvSGE(20)}})
	require.NoError(t, err)
	r.send(t, r.datagram(good, []byte("last"), group), group)
	wcs = a.recv(1, 2*time.Second)
	require.Len(t, wcs, 1)
}

// TestSelfDroppedBeforeICRC: with BlockSelfMulticastLoopback, a datagram
// from the QP's own address and QPN is dropped as its own before the ICRC
// is computed (a corrupted ICRC counts as Self, not BadICRC): a sender
// that also receives does not pay an ICRC check per datagram it sent.
func TestSelfDroppedBeforeICRC(t *testing.T) {
	a := newEndpoint(t, verbs.QPConfig{BlockSelfMulticastLoopback: true})
	a.postRecvs(0, 4)
	a.join("239.201.9.21", false)
	group := [4]byte{239, 201, 9, 21}
	r := newRawSenderFrom(t, a.qp.UnicastIP())
	h := roce.Header{Opcode: roce.OpUDSendOnly, PKey: 0xFFFF, DestQPN: verbs.MulticastQPN, PSN: 1, QKey: verbs.DefaultQKey, SrcQPN: a.qp.QPN()}
	dg := r.datagram(h, []byte("own, bad icrc"), group)
	dg[len(dg)-1] ^= 0x5A
	r.send(t, dg, group)
	// Then a valid one from elsewhere: once it is read, the first was
	// handled (one socket, in order).
	o := newRawSender(t)
	h.SrcQPN ^= 1
	o.send(t, o.datagram(h, []byte("another QP's"), group), group)
	wcs := a.recv(1, 2*time.Second)
	require.Len(t, wcs, 1)
	assert.Equal(t, []byte("another QP's"), a.buf(wcs[0])[verbs.GRHSize:])
	assert.Equal(t, soft.Drops{Self: 1}, a.drops())
}

// TestBareReadsFollowMembership: a GRHAddressesOnly QP reads its
// multicast socket without control messages only while one group is
// joined and nothing from before the last join or leave is queued; else
// each datagram's destination comes from IP_ORIGDSTADDR. Read bare, a
// datagram for a group left a moment ago would fail the ICRC (checked
// against the sole group's address) instead of counting as not for us,
// and one for a second group would be lost.
func TestBareReadsFollowMembership(t *testing.T) {
	b := newEndpoint(t, verbs.QPConfig{GRHAddressesOnly: true})
	r := newRawSender(t)
	g1, g2, g3 := [4]byte{239, 201, 9, 11}, [4]byte{239, 201, 9, 12}, [4]byte{239, 201, 9, 13}
	h := roce.Header{Opcode: roce.OpUDSendOnly, PKey: 0xFFFF, DestQPN: verbs.MulticastQPN, QKey: verbs.DefaultQKey, SrcQPN: 0x4242}
	send := func(g [4]byte, msg string) { r.send(t, r.datagram(h, []byte(msg), g), g) }
	ip := func(g [4]byte) string { return net.IP(g[:]).String() }
	// expect receives want, each with its group as the GRH destination.
	expect := func(want ...string) {
		t.Helper()
		wcs := b.recv(len(want), 2*time.Second)
		require.Len(t, wcs, len(want))
		for i, wc := range wcs {
			buf := b.buf(wc)
			msg, g := want[i][3:], want[i][:2]
			assert.Equal(t, msg, string(buf[verbs.GRHSize:]))
			dst := map[string][4]byte{"g1": g1, "g3": g3}[g]
			assert.Equal(t, dst[:], buf[36:40], "GRH destination of %q", msg)
		}
	}

	m1, _ := b.join(ip(g1), false)
	m2, _ := b.join(ip(g2), false)
	send(g2, "queued before the leave") // queued: no receive posted
	send(g1, "one")
	require.NoError(t, b.id.Leave(m2.MGID))
	b.postRecvs(0, 16)
	expect("g1 one")
	assert.Equal(t, soft.Drops{NotForUs: 1}, b.qp.Drops(), "the left group's datagram")

	send(g1, "two") // now read bare
	expect("g1 two")

	m3, _ := b.join(ip(g3), false) // two groups: control messages again
	send(g3, "three")
	send(g1, "four")
	expect("g3 three", "g1 four")

	require.NoError(t, b.id.Leave(m3.MGID))
	send(g1, "five")
	expect("g1 five")
	require.NoError(t, b.id.Leave(m1.MGID))
	assert.Equal(t, soft.Drops{NotForUs: 1}, b.qp.Drops())
}

// TestTooLongDatagram: a datagram longer than the posted buffer is dropped
// as too long, for both receive layouts, read with control messages or
// bare, and nothing past the buffer is written, nor into the GRO row a
// read in place may have left in the slot (the QP has no GRO area); the
// buffer then takes the next datagram.
func TestTooLongDatagram(t *testing.T) {
	for _, only := range []bool{false, true} {
		b := newEndpoint(t, verbs.QPConfig{GRHAddressesOnly: only})
		r := newRawSender(t)
		mtu := b.id.Local().MTU
		uni := b.qp.UnicastIP()
		h := roce.Header{Opcode: roce.OpUDSendOnly, PKey: 0xFFFF, DestQPN: b.qp.QPN(), QKey: b.qp.QKey(), SrcQPN: 0x4242}
		for _, size := range []int{verbs.GRHSize + mtu, verbs.GRHSize + mtu + 4 + 3 + 4} {
			t.Run(fmt.Sprintf("GRHAddressesOnly=%v/%d", only, size), func(t *testing.T) {
				region := b.arena.Slice(0, uint32(size+64))
				for i := range region {
					region[i] = 0xA5
				}
				row := bytes.Repeat([]byte{0xA5}, 1<<16)
				soft.LeaveRowIovec(b.qp, row)
				_, err := b.qp.PostRecv([]verbs.RecvWR{{WRID: 0, SGE: verbs.SGE{Length: uint32(size), LKey: b.mr.LKey()}}})
				require.NoError(t, err)
				before := b.qp.Drops().TooLong
				r.send(t, r.datagram(h, make([]byte, mtu+40), uni), uni)
				r.send(t, r.datagram(h, []byte("fits"), uni), uni)
				wcs := b.recv(1, 2*time.Second)
				require.Len(t, wcs, 1)
				assert.Equal(t, "fits", string(b.buf(wcs[0])[verbs.GRHSize:]))
				assert.Equal(t, before+1, b.qp.Drops().TooLong)
				requireGuard(t, region, size)
				requireGuard(t, row, 0)
			})
		}
	}
}

// A scattered read gives a datagram 16 bytes of tail scratch past the
// posted buffer (room for ImmDt, pad and ICRC): one that runs past the
// buffer by 16 bytes is read whole and judged by its headers (a bad
// Q_Key counted as one); one that runs 17 past is cut by the kernel and
// dropped as too long before its headers are read. Either way the
// buffer takes the next datagram.
func TestTailScratchBound(t *testing.T) {
	const plen = 112 // no pad: BTH, DETH, 112 bytes, ICRC
	b := newEndpoint(t, verbs.QPConfig{})
	r := newRawSender(t)
	uni := b.qp.UnicastIP()
	badQKey := roce.Header{Opcode: roce.OpUDSendOnly, PKey: 0xFFFF, DestQPN: b.qp.QPN(), QKey: b.qp.QKey() ^ 1, SrcQPN: 0x4242}
	good := badQKey
	good.QKey = b.qp.QKey()
	for _, tt := range []struct {
		body int // the posted buffer past its GRH area: plen + 4 - body past it
		want soft.Drops
	}{
		{body: plen + roce.ICRCSize - 16, want: soft.Drops{BadQKey: 1}},
		{body: plen + roce.ICRCSize - 17, want: soft.Drops{TooLong: 1}},
	} {
		t.Run(fmt.Sprint(tt.body), func(t *testing.T) {
			_, err := b.qp.PostRecv([]verbs.RecvWR{{WRID: 0, SGE: verbs.SGE{Length: uint32(verbs.GRHSize + tt.body), LKey: b.mr.LKey()}}})
			require.NoError(t, err)
			before := b.qp.Drops()
			r.send(t, r.datagram(badQKey, make([]byte, plen), uni), uni)
			r.send(t, r.datagram(good, []byte("fits"), uni), uni)
			wcs := b.recv(1, 2*time.Second)
			require.Len(t, wcs, 1)
			assert.Equal(t, "fits", string(b.buf(wcs[0])[verbs.GRHSize:]))
			d := b.qp.Drops()
			assert.Equal(t, tt.want, soft.Drops{BadQKey: d.BadQKey - before.BadQKey, TooLong: d.TooLong - before.TooLong})
			assert.Equal(t, dropTotal(before)+1, dropTotal(d), "one drop")
		})
	}
}

// TestInPlaceBoundary: a posted buffer with room past GRH + MTU for
// ImmDt, pad and ICRC (11 bytes) takes a datagram in place, a shorter one
// scattered, read with control messages or bare. The payloads are 8
// bytes over the MTU, which the receiver does not check: the datagram is
// accepted where it lands whole, and in place that means within the
// buffer. At 10 bytes past GRH + MTU (scattered) its ICRC runs into the
// tail scratch: accepted. At 11 (in place) it is one byte longer than
// the buffer, its ICRC cut: dropped as TooLong, not completed, although
// the same payload fits a buffer one byte shorter (so the boundary is
// exactly inPlaceSlack). At 12 (in place) it fills the buffer to its
// last byte: accepted (a bare read takes it with recvfrom, which reports
// the datagram's length: equal to the buffer's is not cut). A RoCE
// sender's payload is at most the MTU, which both layouts hold whole.
func TestInPlaceBoundary(t *testing.T) {
	r := newRawSender(t)
	for _, only := range []bool{false, true} {
		for _, past := range []int{10, 11, 12} {
			t.Run(fmt.Sprintf("GRHAddressesOnly=%v/MTU+%d", only, past), func(t *testing.T) {
				b := newEndpoint(t, verbs.QPConfig{GRHAddressesOnly: only})
				mtu := b.id.Local().MTU
				uni := b.qp.UnicastIP()
				h := roce.Header{Opcode: roce.OpUDSendOnly, PKey: 0xFFFF, DestQPN: b.qp.QPN(), QKey: b.qp.QKey(), SrcQPN: 0x4242}
				payload := make([]byte, mtu+8) // no pad: BTH, DETH, payload, ICRC
				for i := range payload {
					payload[i] = byte(i * 7)
				}
				size := verbs.GRHSize + mtu + past
				_, err := b.qp.PostRecv([]verbs.RecvWR{{WRID: 0, SGE: verbs.SGE{Length: uint32(size), LKey: b.mr.LKey()}}})
				require.NoError(t, err)
				before, bare := b.qp.Drops(), soft.BareReads(b.qp)
				if past == 11 {
					// The receive is still posted after the drop: the
					// next datagram (read after it) takes it.
					r.send(t, r.datagram(h, payload, uni), uni)
					r.send(t, r.datagram(h, []byte("fits"), uni), uni)
					wcs := b.recv(1, 2*time.Second)
					require.Len(t, wcs, 1, "drops %+v", b.qp.Drops())
					require.Equal(t, "fits", string(b.buf(wcs[0])[verbs.GRHSize:]), "the datagram one byte longer than the in-place buffer was completed")
					d := b.qp.Drops()
					require.Equal(t, soft.Drops{TooLong: 1}, soft.Drops{TooLong: d.TooLong - before.TooLong}, "drops %+v", d)
					require.Equal(t, dropTotal(before)+1, dropTotal(d), "one drop")
					return
				}
				r.send(t, r.datagram(h, payload, uni), uni)
				wcs := b.recv(1, 2*time.Second)
				require.Len(t, wcs, 1, "drops %+v", b.qp.Drops())
				require.Equal(t, only, soft.BareReads(b.qp) > bare, "read bare")
				require.Equal(t, verbs.WCSuccess, wcs[0].Status)
				require.Equal(t, uint32(verbs.GRHSize+len(payload)), wcs[0].ByteLen)
				require.Equal(t, payload, b.buf(wcs[0])[verbs.GRHSize:])
				require.Equal(t, dropTotal(before), dropTotal(b.qp.Drops()), "drops")
			})
		}
	}
}

// TestBareReadsInSteadyState: request/response traffic to a
// GRHAddressesOnly QP with one group is read bare from the second
// datagram on, whether Poll follows a wake (one-slot reads) or checks
// readiness first; a QP without the option never reads bare.
func TestBareReadsInSteadyState(t *testing.T) {
	a := newEndpoint(t, verbs.QPConfig{})
	for _, only := range []bool{false, true} {
		b := newEndpoint(t, verbs.QPConfig{GRHAddressesOnly: only})
		b.postRecvs(0, 8)
		m, _ := b.join("239.201.9.21", false)
		am, ah := a.join("239.201.9.21", true)
		require.Equal(t, m.MGID, am.MGID)
		const rounds = 20
		for i := range rounds {
			a.send(ah, am.RemoteQPN, []byte{byte(i)}, 0, 0)
			var wcs []verbs.WC
			if i%2 == 0 { // the first poll as after a wake
				woke := make([]verbs.WC, 64)
				n, err := soft.PollRecvWoken(b.qp, woke)
				require.NoError(t, err)
				wcs = woke[:n]
			}
			if len(wcs) == 0 {
				wcs = b.recv(1, 2*time.Second)
			}
			require.Len(t, wcs, 1)
			require.Equal(t, []byte{byte(i)}, b.buf(wcs[0])[verbs.GRHSize:])
			b.postRecvs(int(wcs[0].WRID), 1)
		}
		if only {
			assert.GreaterOrEqual(t, soft.BareReads(b.qp), uint64(rounds-1))
		} else {
			assert.Zero(t, soft.BareReads(b.qp))
		}
	}
}

// TestICRCForDFClear: a datagram whose ICRC was computed for DF clear (a
// sender that lets routers fragment) is accepted, and its GRH shows DF
// clear; one computed for DF set shows it set.
func TestICRCForDFClear(t *testing.T) {
	b := newEndpoint(t, verbs.QPConfig{GRHAddressesOnly: true})
	b.postRecvs(0, 4)
	uni := b.qp.UnicastIP()
	h := roce.Header{Opcode: roce.OpUDSendOnly, PKey: 0xFFFF, DestQPN: b.qp.QPN(), QKey: b.qp.QKey(), SrcQPN: 0x4242}
	for _, noDF := range []bool{true, false} {
		r := newRawSender(t)
		r.noDF = noDF
		r.send(t, r.datagram(h, []byte("df"), uni), uni)
		wcs := b.recv(1, 2*time.Second)
		require.Len(t, wcs, 1, "DF clear: %v", noDF)
		ip := b.buf(wcs[0])[20:verbs.GRHSize]
		want := uint16(0x4000)
		if noDF {
			want = 0
		}
		assert.Equal(t, want, binary.BigEndian.Uint16(ip[6:]), "GRH flags and fragment offset, DF clear: %v", noDF)
		assert.Equal(t, uint16(0), binary.BigEndian.Uint16(ip[4:]), "GRH IP ID")
		assertIPv4Checksum(t, ip)
		assert.Zero(t, b.qp.Drops().BadICRC)
	}
}

// A QP without GRHAddressesOnly shows the TOS a datagram arrived with in
// its GRH's IPv4 header (IP_RECVTOS): soft's own sends set none, so here a
// raw sender sets DSCP EF and ECT(0).
func TestGRHShowsReceivedTOS(t *testing.T) {
	const tos = 0xB8 | 0x2
	b := newEndpoint(t, verbs.QPConfig{})
	r := newRawSender(t)
	require.NoError(t, unix.SetsockoptInt(r.fd, unix.IPPROTO_IP, unix.IP_TOS, tos))
	uni := b.qp.UnicastIP()
	h := roce.Header{Opcode: roce.OpUDSendOnly, PKey: 0xFFFF, DestQPN: b.qp.QPN(), QKey: b.qp.QKey(), SrcQPN: 0x4242}
	b.postRecvs(0, 1)
	r.send(t, r.datagram(h, []byte("with a TOS"), uni), uni)
	wcs := b.recv(1, 2*time.Second)
	require.Len(t, wcs, 1)
	ip := b.buf(wcs[0])[20:verbs.GRHSize]
	require.Equal(t, byte(tos), ip[1], "got TOS %#x, want %#x", ip[1], tos)
	assertIPv4Checksum(t, ip)
}

// A GRHAddressesOnly QP with two groups reads its multicast socket with
// IP_ORIGDSTADDR (the destination tells the groups apart) even after a bare
// read of its unicast socket: the bare unicast read must not turn the
// multicast socket's IP_RECVORIGDSTADDR off.
func TestOrigDstKeptAcrossBareUnicastRead(t *testing.T) {
	a := newEndpoint(t, verbs.QPConfig{})
	b := newEndpoint(t, verbs.QPConfig{GRHAddressesOnly: true})
	groups := []string{"239.202.9.21", "239.202.9.22"}
	var ahs []verbs.AH
	var qpn uint32
	for _, g := range groups {
		m, _ := b.join(g, false)
		_, ah := a.join(g, true)
		ahs, qpn = append(ahs, ah), m.RemoteQPN
	}
	b.postRecvs(0, 3)
	wantDst := func(what string, want net.IP) {
		t.Helper()
		wcs := b.recv(1, 2*time.Second)
		require.Len(t, wcs, 1, what)
		got := net.IP(b.buf(wcs[0])[20+16 : 20+20])
		require.True(t, want.Equal(got), "%s: got destination %v, want %v", what, got, want)
	}
	a.send(ahs[0], qpn, []byte("to the first group"), 0, 0)
	wantDst("multicast before", net.ParseIP(groups[0]))
	a.unicastTo(b, []byte("unicast, read bare"))
	require.NotZero(t, soft.BareReads(b.qp), "got no bare read, want the unicast one read bare")
	a.send(ahs[1], qpn, []byte("to the second group"), 0, 0)
	wantDst("multicast after a bare unicast read", net.ParseIP(groups[1]))
}

// TestImmShortPayloads: a datagram with immediate data has its payload
// moved down over the ImmDt to the buffer's start, scattered or in
// place, for payloads of one byte and a few: every byte moved.
func TestImmShortPayloads(t *testing.T) {
	e := newEndpoint(t, verbs.QPConfig{})
	b := newEndpoint(t, verbs.QPConfig{})
	mtu := b.id.Local().MTU
	ah, err := e.qp.CreateAH(verbs.AHAttr{DGID: b.id.Local().GID, IsGlobal: true, HopLimit: 64})
	require.NoError(t, err)
	for _, inPlace := range []bool{false, true} {
		for _, n := range []int{1, 2, 5} {
			t.Run(fmt.Sprintf("inPlace=%v/%d", inPlace, n), func(t *testing.T) {
				size := uint32(bufSize)
				if inPlace {
					size = uint32(verbs.GRHSize + mtu + 4 + 3 + 4)
				}
				_, err := b.qp.PostRecv([]verbs.RecvWR{{WRID: 0, SGE: verbs.SGE{Length: size, LKey: b.mr.LKey()}}})
				require.NoError(t, err)
				payload := []byte("abcde")[:n]
				e.send(ah, b.qp.QPN(), payload, verbs.SendWithImm, 0xA1B2C3D4)
				wcs := b.recv(1, 2*time.Second)
				require.Len(t, wcs, 1, "drops %+v", b.qp.Drops())
				require.NotZero(t, wcs[0].Flags&verbs.WCWithImm)
				require.Equal(t, uint32(0xA1B2C3D4), wcs[0].Imm)
				require.Equal(t, payload, b.buf(wcs[0])[verbs.GRHSize:])
			})
		}
	}
}

// TestBareReadsWaitForTheMulticastSocket: what makes bare reads of the
// multicast socket safe again after a leave is that socket read dry, not
// the unicast one. A wake reads the unicast socket first (the last
// datagram came from there) and finds it empty; the multicast socket
// still holds a datagram for the group just left, which must be read
// with its destination (not for us), not bare as the sole group's (a bad
// ICRC).
func TestBareReadsWaitForTheMulticastSocket(t *testing.T) {
	b := newEndpoint(t, verbs.QPConfig{GRHAddressesOnly: true})
	r := newRawSender(t)
	g1, g2 := [4]byte{239, 201, 9, 14}, [4]byte{239, 201, 9, 15}
	ip := func(g [4]byte) string { return net.IP(g[:]).String() }
	b.postRecvs(0, 16)
	b.join(ip(g1), false)
	m2, _ := b.join(ip(g2), false)

	uni := b.qp.UnicastIP()
	hu := roce.Header{Opcode: roce.OpUDSendOnly, PKey: 0xFFFF, DestQPN: b.qp.QPN(), QKey: b.qp.QKey(), SrcQPN: 0x4242}
	r.send(t, r.datagram(hu, []byte("unicast"), uni), uni)
	wcs := b.recv(1, 2*time.Second)
	require.Len(t, wcs, 1)
	require.Equal(t, "unicast", string(b.buf(wcs[0])[verbs.GRHSize:]))

	hm := roce.Header{Opcode: roce.OpUDSendOnly, PKey: 0xFFFF, DestQPN: verbs.MulticastQPN, QKey: verbs.DefaultQKey, SrcQPN: 0x4242}
	r.send(t, r.datagram(hm, []byte("for g2"), g2), g2)
	require.True(t, waitReadable(t, soft.RecvWaiterHooksOf(b.qp).NarrowFd(), 2*time.Second), "g2's datagram")
	require.NoError(t, b.id.Leave(m2.MGID))

	n, err := soft.PollRecvWoken(b.qp, make([]verbs.WC, 4))
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, soft.Drops{NotForUs: 1}, b.qp.Drops(), "the left group's datagram")
}

// TestWakeReadsPastADroppedDatagram: a Poll goes on to the other socket
// when all it read from one was dropped: it returns 0 only with both
// sockets read dry (a reader then sleeps on a channel that must not be
// readable). Here a wake reads the multicast socket first (where the
// last datagram came from), finds a datagram with a bad Q_Key, and must
// return the good unicast one in the same Poll.
func TestWakeReadsPastADroppedDatagram(t *testing.T) {
	b := newEndpoint(t, verbs.QPConfig{})
	r := newRawSender(t)
	g := [4]byte{239, 201, 9, 16}
	b.join(net.IP(g[:]).String(), false)
	b.postRecvs(0, 8)
	hm := roce.Header{Opcode: roce.OpUDSendOnly, PKey: 0xFFFF, DestQPN: verbs.MulticastQPN, QKey: verbs.DefaultQKey, SrcQPN: 0x4242}
	r.send(t, r.datagram(hm, []byte("multicast"), g), g)
	wcs := b.recv(1, 2*time.Second) // the last datagram came from the multicast socket
	require.Len(t, wcs, 1)

	hm.QKey ^= 1
	r.send(t, r.datagram(hm, []byte("bad Q_Key"), g), g)
	uni := b.qp.UnicastIP()
	hu := roce.Header{Opcode: roce.OpUDSendOnly, PKey: 0xFFFF, DestQPN: b.qp.QPN(), QKey: b.qp.QKey(), SrcQPN: 0x4242}
	r.send(t, r.datagram(hu, []byte("unicast"), uni), uni)
	require.True(t, waitReadable(t, soft.RecvWaiterHooksOf(b.qp).NarrowFd(), 2*time.Second), "the multicast datagram")
	require.True(t, waitReadable(t, soft.UnicastFd(b.qp), 2*time.Second), "the unicast datagram")

	w := make([]verbs.WC, 4)
	n, err := soft.PollRecvWoken(b.qp, w)
	require.NoError(t, err)
	require.Equal(t, 1, n, "a wake that dropped the multicast socket's datagram (drops %+v)", b.qp.Drops())
	require.Equal(t, "unicast", string(b.buf(w[0])[verbs.GRHSize:]))
	require.Equal(t, soft.Drops{BadQKey: 1}, b.drops())
}
