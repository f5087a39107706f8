package soft_test

import (
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/internal/verbs/soft"
)

// rawSender is a plain UDP socket on 127.0.0.1 that sends hand-made
// datagrams to groups on lo, with DF set (so IP ID 0).
type rawSender struct {
	fd    int
	sport uint16
}

func newRawSender(t *testing.T) *rawSender {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(fd) })
	require.NoError(t, unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	lo, err := net.InterfaceByName("lo")
	require.NoError(t, err)
	require.NoError(t, unix.SetsockoptIPMreqn(fd, unix.IPPROTO_IP, unix.IP_MULTICAST_IF,
		&unix.IPMreqn{Address: [4]byte{127, 0, 0, 1}, Ifindex: int32(lo.Index)}))
	require.NoError(t, unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO))
	sa, err := unix.Getsockname(fd)
	require.NoError(t, err)
	return &rawSender{fd: fd, sport: uint16(sa.(*unix.SockaddrInet4).Port)}
}

// datagram builds a UD SEND_ONLY datagram to group with a correct ICRC for
// an IPv4 header with ID 0 and DF.
func (r *rawSender) datagram(h soft.Header, payload []byte, group [4]byte) []byte {
	h.PadCnt = uint8(soft.PadFor(len(payload)))
	dg := make([]byte, h.Len()+len(payload)+int(h.PadCnt)+soft.ICRCSize)
	n := h.Encode(dg)
	copy(dg[n:], payload)
	pkt := make([]byte, 28+len(dg))
	pkt[0] = 0x45
	binary.BigEndian.PutUint16(pkt[2:], uint16(len(pkt)))
	pkt[6] = 0x40
	pkt[9] = 17
	copy(pkt[12:], []byte{127, 0, 0, 1})
	copy(pkt[16:], group[:])
	binary.BigEndian.PutUint16(pkt[20:], r.sport)
	binary.BigEndian.PutUint16(pkt[22:], soft.UDPPort)
	binary.BigEndian.PutUint16(pkt[24:], uint16(8+len(dg)))
	copy(pkt[28:], dg)
	crc, err := soft.ICRC(pkt)
	if err != nil {
		panic(err)
	}
	binary.LittleEndian.PutUint32(dg[len(dg)-4:], crc)
	return dg
}

func (r *rawSender) send(t *testing.T, dg []byte, group [4]byte) {
	require.NoError(t, unix.Sendto(r.fd, dg, 0, &unix.SockaddrInet4{Port: soft.UDPPort, Addr: group}))
}

func TestRawBadPacketsDroppedAndCounted(t *testing.T) {
	a := newEndpoint(t, verbs.QPConfig{})
	a.postRecvs(0, 16)
	a.join("239.201.9.1", false)
	group := [4]byte{239, 201, 9, 1}
	r := newRawSender(t)
	good := soft.Header{Opcode: soft.OpUDSendOnly, PKey: 0xFFFF, DestQPN: verbs.MulticastQPN, PSN: 1, QKey: verbs.DefaultQKey, SrcQPN: 0x4242}

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
	assert.Equal(t, uint64(1), a.qp.DropCounts()["bad ICRC"])

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
