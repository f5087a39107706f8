//go:build linux

package soft_test

import (
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/roce"
	"github.com/go-rdma/rdmanet/internal/testenv"
	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/internal/verbs/soft"
)

// sendBatch sends n datagrams of 64 bytes to ah/qpn, a batch of up to
// nBufs at a time, and checks their completions.
func (e *endpoint) sendBatch(ah verbs.AH, qpn uint32, n int) {
	e.t.Helper()
	wrs := make([]verbs.SendWR, 0, nBufs)
	wcs := make([]verbs.WC, nBufs)
	for sent := 0; sent < n; {
		wrs = wrs[:0]
		for i := 0; i < nBufs && sent+i < n; i++ {
			wrs = append(wrs, verbs.SendWR{WRID: uint64(sent + i), SGE: e.sendSGE(i, 64), AH: ah, RemoteQPN: qpn,
				RemoteQKey: e.qp.QKey(), Flags: verbs.SendSignaled})
		}
		k, err := e.qp.PostSend(wrs)
		require.NoError(e.t, err)
		require.Equal(e.t, len(wrs), k)
		got := 0
		for got < k {
			m, err := e.qp.SendCQ().Poll(wcs)
			require.NoError(e.t, err)
			for _, wc := range wcs[:m] {
				require.Equal(e.t, verbs.WCSuccess, wc.Status)
			}
			got += m
		}
		sent += k
	}
}

// recvAll receives n datagrams on e, reposting each buffer.
func (e *endpoint) recvAll(n int, timeout time.Duration) int {
	e.t.Helper()
	wcs := make([]verbs.WC, nBufs)
	got := 0
	deadline := time.Now().Add(timeout)
	for got < n && time.Now().Before(deadline) {
		k, err := e.qp.RecvCQ().Poll(wcs)
		require.NoError(e.t, err)
		for _, wc := range wcs[:k] {
			require.Equal(e.t, verbs.WCSuccess, wc.Status)
			e.postRecvs(int(wc.WRID), 1)
		}
		got += k
		if k == 0 {
			time.Sleep(100 * time.Microsecond)
		}
	}
	return got
}

// TestSelfFilterDropsOwnMulticast: a BlockSelfMulticastLoopback QP that
// sends to a group it is a member of never gets its own datagrams on its
// multicast socket (the kernel's filter drops them: DropSelf stays 0, and
// they do not show as Overflow), while a peer QP on the same host gets
// every one, and the peer's datagrams and unicast reach the QP.
func TestSelfFilterDropsOwnMulticast(t *testing.T) {
	const n = 300
	a := newEndpoint(t, verbs.QPConfig{BlockSelfMulticastLoopback: true})
	b := newEndpoint(t, verbs.QPConfig{})
	require.True(t, soft.SelfFiltered(a.qp), "the self filter was not attached")
	assert.False(t, soft.SelfFiltered(b.qp), "a QP that takes its own loopback has no filter")
	a.postRecvs(0, nBufs)
	b.postRecvs(0, nBufs)
	m, ah := a.join("239.201.15.1", false)
	_, bah := b.join("239.201.15.1", false)

	a.sendBatch(ah, m.RemoteQPN, n)
	a.send(ah, m.RemoteQPN, []byte("lone"), 0, 0) // sendto, not sendmmsg
	assert.Equal(t, n+1, b.recvAll(n+1, 5*time.Second), "the peer gets every datagram")
	assert.Empty(t, a.recv(1, 50*time.Millisecond))
	assert.Equal(t, soft.Drops{}, a.drops(), "own datagrams reached the socket, or show as drops")

	// The peer's multicast and unicast still pass the filter.
	b.sendBatch(bah, m.RemoteQPN, n)
	assert.Equal(t, n, a.recvAll(n, 5*time.Second), "the QP gets every datagram of the peer")
	b.unicastTo(a, []byte("unicast"))
	assert.Equal(t, soft.Drops{}, a.drops())
	assert.Equal(t, soft.Drops{}, b.drops())
}

// TestSelfFilterWithout: where the filter cannot be attached the QP goes
// on without it, and the user-space check drops its own datagrams.
func TestSelfFilterWithout(t *testing.T) {
	restore := soft.NoSelfFilter()
	a := newEndpoint(t, verbs.QPConfig{BlockSelfMulticastLoopback: true})
	restore()
	require.False(t, soft.SelfFiltered(a.qp))
	a.postRecvs(0, nBufs)
	m, ah := a.join("239.201.15.2", false)
	a.sendBatch(ah, m.RemoteQPN, 10)
	assert.Empty(t, a.recv(1, 100*time.Millisecond))
	assert.Equal(t, soft.Drops{Self: 10}, a.drops())
}

// TestSelfFilterPassesOthersAtOwnAddress: the filter drops only what has
// the QP's address, port 4791 and QPN. A datagram from the QP's address
// and port with another QPN (as from another QP sharing a netdev's
// address) passes and is received; one from its address, another port
// and its own QPN passes the filter and is dropped by the user-space
// check (Self); one shorter than a DETH from its address and port passes
// and counts as Truncated, the one a byte short of the source QP's end
// too (a filter that loaded past the datagram would drop it). The IPv4
// source the filter reads at SKF_NET_OFF and the UDP port at offset 0
// are checked here: a filter reading either wrong drops all or none.
func TestSelfFilterPassesOthersAtOwnAddress(t *testing.T) {
	a := newEndpoint(t, verbs.QPConfig{BlockSelfMulticastLoopback: true})
	require.True(t, soft.SelfFiltered(a.qp))
	a.postRecvs(0, 4)
	a.join("239.201.15.3", false)
	group := [4]byte{239, 201, 15, 3}
	src := a.qp.UnicastIP()

	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(fd) })
	require.NoError(t, unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1))
	require.NoError(t, unix.Bind(fd, &unix.SockaddrInet4{Port: roce.UDPPort, Addr: src}))
	require.NoError(t, unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO))
	other := newRawSenderFrom(t, src) // own address, another port

	h := roce.Header{Opcode: roce.OpUDSendOnly, PKey: 0xFFFF, DestQPN: verbs.MulticastQPN, PSN: 1, QKey: verbs.DefaultQKey, SrcQPN: a.qp.QPN()}
	send := func(fd int, dg []byte) {
		require.NoError(t, unix.Sendto(fd, dg, 0, &unix.SockaddrInet4{Port: roce.UDPPort, Addr: group}))
	}
	// Own address and port, own QPN: the filter's.
	send(fd, datagramFrom(t, h, []byte("own"), src, roce.UDPPort, group))
	// Own address and port, too short for a DETH: 5 bytes, and 19 (one
	// short of the DETH's source QP, which the filter must not load).
	send(fd, []byte("short"))
	send(fd, make([]byte, 19))
	// Own address, another port, own QPN.
	send(other.fd, datagramFrom(t, h, []byte("own, other port"), src, other.sport, group))
	// Own address and port, another QPN.
	h.SrcQPN ^= 1
	send(fd, datagramFrom(t, h, []byte("another QP"), src, roce.UDPPort, group))

	wcs := a.recv(1, 2*time.Second)
	require.Len(t, wcs, 1)
	assert.Equal(t, []byte("another QP"), a.buf(wcs[0])[verbs.GRHSize:])
	assert.Equal(t, a.qp.QPN()^1, wcs[0].SrcQP)
	// The first, which the QP did not send, is the kernel's drop: the
	// filter's drops count in sk_drops, less only the QP's own sends.
	assert.Equal(t, soft.Drops{Self: 1, Truncated: 2, Overflow: 1}, a.drops())
}

// datagramFrom builds a UD SEND_ONLY datagram to group with the ICRC of an
// IPv4 header from src:sport with ID 0 and DF.
func datagramFrom(t *testing.T, h roce.Header, payload []byte, src [4]byte, sport uint16, group [4]byte) []byte {
	h.PadCnt = uint8(roce.PadFor(len(payload)))
	d := make([]byte, h.Len()+len(payload)+int(h.PadCnt)+roce.ICRCSize)
	copy(d[h.Encode(d):], payload)
	pkt := make([]byte, 28+len(d))
	pkt[0], pkt[6], pkt[9] = 0x45, 0x40, unix.IPPROTO_UDP
	binary.BigEndian.PutUint16(pkt[2:], uint16(len(pkt)))
	copy(pkt[12:], src[:])
	copy(pkt[16:], group[:])
	binary.BigEndian.PutUint16(pkt[20:], sport)
	binary.BigEndian.PutUint16(pkt[22:], roce.UDPPort)
	binary.BigEndian.PutUint16(pkt[24:], uint16(8+len(d)))
	copy(pkt[28:], d)
	crc, err := roce.ICRC(pkt)
	require.NoError(t, err)
	binary.LittleEndian.PutUint32(d[len(d)-4:], crc)
	return d
}

// TestSelfFilterPassesZeroNetSource: the filter compares the datagram's
// IPv4 source with the QP's address first and passes every other source,
// even one that, as a number, is the QP's QPN (0.x.y.z: an address the
// kernel routes nowhere and drops as a martian on input; forged here with
// IP_HDRINCL and looped back on lo, which keeps the packet's output route
// and so skips that check). (In a namespace of its own: it sends forged
// packets.)
func TestSelfFilterPassesZeroNetSource(t *testing.T) {
	if !testenv.InOwnNetns(t) {
		return
	}
	a := newEndpoint(t, verbs.QPConfig{BlockSelfMulticastLoopback: true})
	require.True(t, soft.SelfFiltered(a.qp))
	a.postRecvs(0, 4)
	a.join("239.201.15.4", false)
	group := [4]byte{239, 201, 15, 4}
	qpn := a.qp.QPN()
	src := [4]byte{0, byte(qpn >> 16), byte(qpn >> 8), byte(qpn)}

	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(fd) })
	lo, err := net.InterfaceByName("lo")
	require.NoError(t, err)
	require.NoError(t, unix.SetsockoptIPMreqn(fd, unix.IPPROTO_IP, unix.IP_MULTICAST_IF,
		&unix.IPMreqn{Address: [4]byte{127, 0, 0, 1}, Ifindex: int32(lo.Index)}))

	h := roce.Header{Opcode: roce.OpUDSendOnly, PKey: 0xFFFF, DestQPN: verbs.MulticastQPN, PSN: 1, QKey: verbs.DefaultQKey, SrcQPN: 0x4242}
	d := datagramFrom(t, h, []byte("from 0/8"), src, roce.UDPPort, group)
	pkt := make([]byte, 28+len(d))
	pkt[0], pkt[6], pkt[8], pkt[9] = 0x45, 0x40, 64, unix.IPPROTO_UDP // DF, TTL 64; ID 0 as sealed
	binary.BigEndian.PutUint16(pkt[2:], uint16(len(pkt)))
	copy(pkt[12:], src[:])
	copy(pkt[16:], group[:])
	binary.BigEndian.PutUint16(pkt[20:], roce.UDPPort)
	binary.BigEndian.PutUint16(pkt[22:], roce.UDPPort)
	binary.BigEndian.PutUint16(pkt[24:], uint16(8+len(d))) // no UDP checksum
	copy(pkt[28:], d)
	require.NoError(t, unix.Sendto(fd, pkt, 0, &unix.SockaddrInet4{Addr: group}))

	wcs := a.recv(1, 2*time.Second)
	require.Len(t, wcs, 1, "the datagram from %v; drops %+v", net.IP(src[:]), a.qp.Drops())
	assert.Equal(t, []byte("from 0/8"), a.buf(wcs[0])[verbs.GRHSize:])
	assert.Equal(t, uint32(0x4242), wcs[0].SrcQP)
}

// The self filter passes a datagram from the QP's own address and port
// that is too short to hold a DETH, whatever its length (the check in Go
// drops it as truncated, and counts it): it compares no source QP with
// the length it loaded. Here the filter of a QP whose QPN, 20, is such a
// length, on a socket of the test's own, gets every short length from
// 127.0.0.1:4791, then a whole datagram from QPN 20 (dropped) and one
// from QPN 21 (passed).
func TestSelfFilterPassesShortDatagrams(t *testing.T) {
	const qpn = 20
	src := [4]byte{127, 0, 0, 1}
	rx, sa := filteredSocket(t, src, qpn)
	tx := roceSender(t, src)

	const udpHdr = 8
	var sent []int
	for n := 0; udpHdr+n < soft.SelfFilterMinLen; n++ {
		require.NoError(t, unix.Sendto(tx, make([]byte, n), 0, sa))
		sent = append(sent, n)
	}
	whole := func(from uint32) []byte {
		b := make([]byte, soft.SelfFilterMinLen-udpHdr)
		binary.BigEndian.PutUint32(b[16:], from) // DETH: reserved byte, source QP
		return b
	}
	require.NoError(t, unix.Sendto(tx, whole(qpn), 0, sa))
	require.NoError(t, unix.Sendto(tx, whole(qpn+1), 0, sa))
	buf := make([]byte, 64)
	for _, n := range sent {
		k, _, err := unix.Recvfrom(rx, buf, 0)
		require.NoError(t, err, "the datagram of %d bytes (UDP length %d) was not received", n, udpHdr+n)
		require.Equal(t, n, k, "a short datagram dropped (UDP length %d)", udpHdr+n)
	}
	k, _, err := unix.Recvfrom(rx, buf, 0)
	require.NoError(t, err)
	require.Equal(t, whole(qpn+1), buf[:k], "the next datagram: QPN 21's (QPN 20's is dropped)")
}

// The self filter passes a datagram from the QP's own address but another
// UDP port, whatever source QP it names: only src:4791 is the QP. Here
// the QPN of the filter is the other port's number, so that a filter
// that, on a port other than 4791, went on to compare the loaded port
// with the QPN would drop it. A datagram from 127.0.0.1:4791 with the
// next QPN follows, as a marker.
func TestSelfFilterPassesOtherPorts(t *testing.T) {
	src := [4]byte{127, 0, 0, 1}
	other, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(other)
	require.NoError(t, unix.Bind(other, &unix.SockaddrInet4{Addr: src}))
	osa, err := unix.Getsockname(other)
	require.NoError(t, err)
	port := osa.(*unix.SockaddrInet4).Port
	require.NotEqual(t, roce.UDPPort, port)
	qpn := uint32(port)

	rx, sa := filteredSocket(t, src, qpn)
	roceTx := roceSender(t, src)

	const udpHdr = 8
	whole := func(from uint32) []byte {
		b := make([]byte, soft.SelfFilterMinLen-udpHdr)
		binary.BigEndian.PutUint32(b[16:], from) // DETH: reserved byte, source QP
		return b
	}
	require.NoError(t, unix.Sendto(other, whole(qpn), 0, sa))
	require.NoError(t, unix.Sendto(roceTx, whole(qpn+1), 0, sa))
	buf := make([]byte, 64)
	k, from, err := unix.Recvfrom(rx, buf, 0)
	require.NoError(t, err, "nothing received")
	require.Equal(t, port, from.(*unix.SockaddrInet4).Port, "the datagram from port %d (QPN %d) was dropped", port, qpn)
	require.Equal(t, whole(qpn), buf[:k])
	k, from, err = unix.Recvfrom(rx, buf, 0)
	require.NoError(t, err, "the marker was not received")
	assert.Equal(t, roce.UDPPort, from.(*unix.SockaddrInet4).Port)
	assert.Equal(t, whole(qpn+1), buf[:k])
}

// filteredSocket is a UDP socket on src (a port of the kernel's choice,
// sa) with the self filter of QP qpn at src attached; its reads give up
// after 2 s.
func filteredSocket(t *testing.T, src [4]byte, qpn uint32) (int, unix.Sockaddr) {
	t.Helper()
	rx, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(rx) })
	require.NoError(t, unix.Bind(rx, &unix.SockaddrInet4{Addr: src}))
	require.NoError(t, unix.SetsockoptTimeval(rx, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 2}))
	require.True(t, soft.AttachSelfFilter(rx, src, qpn), "SO_ATTACH_FILTER")
	sa, err := unix.Getsockname(rx)
	require.NoError(t, err)
	return rx, sa
}

// roceSender is a UDP socket bound to src:4791 beside the QPs there, as
// a RoCE peer at that address sends from.
func roceSender(t *testing.T, src [4]byte) int {
	t.Helper()
	tx, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(tx) })
	require.NoError(t, unix.SetsockoptInt(tx, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1))
	require.NoError(t, unix.Bind(tx, &unix.SockaddrInet4{Addr: src, Port: roce.UDPPort}))
	return tx
}
