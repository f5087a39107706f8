//go:build linux

package soft_test

import (
	"bytes"
	"encoding/binary"
	"net"
	"os/exec"
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

// groSeg is one datagram of a synthetic coalesced read.
type groSeg struct {
	plen    int
	imm     bool
	badICRC bool // its ICRC corrupted
	badQKey bool
}

// coalesced builds the datagrams of segs back to back, each to q's QPN
// with its Q_Key and ICRC sealed from src:sport to dst with IP ID id0+j
// (or 0 for all, numbered false), and returns the read, the segment size
// (the first datagram's length) and each datagram's payload.
func coalesced(t *testing.T, q *soft.QP, segs []groSeg, src, dst [4]byte, sport uint16, numbered bool) ([]byte, int, [][]byte) {
	t.Helper()
	var read []byte
	var payloads [][]byte
	seg := 0
	for j, s := range segs {
		h := roce.Header{Opcode: roce.OpUDSendOnly, PKey: 0xFFFF, DestQPN: q.QPN(), PSN: uint32(100 + j), QKey: q.QKey(), SrcQPN: 0x4242}
		if s.imm {
			h.Opcode, h.Imm = roce.OpUDSendOnlyImm, 0xC0FFEE00|uint32(j)
		}
		if s.badQKey {
			h.QKey ^= 1
		}
		payload := make([]byte, s.plen)
		for i := range payload {
			payload[i] = byte(j*31 + i)
		}
		h.PadCnt = uint8(roce.PadFor(len(payload)))
		d := make([]byte, h.Len()+len(payload)+int(h.PadCnt)+roce.ICRCSize)
		copy(d[h.Encode(d):], payload)
		id := uint16(0)
		if numbered {
			id = uint16(j)
		}
		pkt := make([]byte, 28+len(d))
		pkt[0], pkt[9] = 0x45, unix.IPPROTO_UDP
		binary.BigEndian.PutUint16(pkt[2:], uint16(len(pkt)))
		binary.BigEndian.PutUint16(pkt[4:], id)
		pkt[6] = 0x40 // DF
		copy(pkt[12:], src[:])
		copy(pkt[16:], dst[:])
		binary.BigEndian.PutUint16(pkt[20:], sport)
		binary.BigEndian.PutUint16(pkt[22:], roce.UDPPort)
		binary.BigEndian.PutUint16(pkt[24:], uint16(8+len(d)))
		copy(pkt[28:], d)
		crc, err := roce.ICRC(pkt)
		require.NoError(t, err)
		binary.LittleEndian.PutUint32(d[len(d)-4:], crc)
		if s.badICRC {
			d[len(d)-1] ^= 0x5A
		}
		if j == 0 {
			seg = len(d)
		}
		read = append(read, d...)
		payloads = append(payloads, payload)
	}
	return read, seg, payloads
}

// A coalesced read splits into its datagrams, each completing its own
// posted receive in order or dropped and counted on its own; what finds
// no receive posted, or no room in the completions asked for, waits for
// the next Poll and is not lost.
func TestCoalescedReadSplit(t *testing.T) {
	src, sport := [4]byte{127, 0, 0, 1}, uint16(0xC123)
	n := func(k int, s groSeg) []groSeg {
		ss := make([]groSeg, k)
		for i := range ss {
			ss[i] = s
		}
		return ss
	}
	tests := []struct {
		name     string
		segs     []groSeg
		numbered bool // IP IDs 0, 1, 2... as GSO numbers them; else all 0, as a NIC's GRO may merge them
		posted   int  // receives posted first; the rest after the first Poll that finds none
		wcs      int  // completions asked for per Poll
		drops    soft.Drops
	}{
		{name: "equal segments", segs: n(4, groSeg{plen: 64}), numbered: true, posted: 8, wcs: 64},
		{name: "two segments", segs: n(2, groSeg{plen: 64}), numbered: true, posted: 8, wcs: 64},
		{name: "one segment", segs: n(1, groSeg{plen: 64}), numbered: true, posted: 8, wcs: 64},
		{name: "last one shorter", segs: append(n(3, groSeg{plen: 100}), groSeg{plen: 9}), numbered: true, posted: 8, wcs: 64},
		{name: "IDs all 0", segs: n(5, groSeg{plen: 1024}), posted: 8, wcs: 64},
		{name: "with immediate", segs: n(3, groSeg{plen: 33, imm: true}), numbered: true, posted: 8, wcs: 64},
		{name: "32 of 1 KiB", segs: n(32, groSeg{plen: 1024}), numbered: true, posted: 64, wcs: 64},
		{name: "bad ICRC in the middle",
			segs:     []groSeg{{plen: 64}, {plen: 64}, {plen: 64, badICRC: true}, {plen: 64}, {plen: 64}},
			numbered: true, posted: 8, wcs: 64, drops: soft.Drops{BadICRC: 1}},
		{name: "bad Q_Key in the middle",
			segs:     []groSeg{{plen: 64}, {plen: 64, badQKey: true}, {plen: 64}},
			numbered: true, posted: 8, wcs: 64, drops: soft.Drops{BadQKey: 1}},
		{name: "more datagrams than posted receives", segs: n(6, groSeg{plen: 200}), numbered: true, posted: 4, wcs: 64},
		{name: "fewer completions asked for", segs: n(7, groSeg{plen: 200}), numbered: true, posted: 8, wcs: 2},
		{name: "one receive at a time, a bad one among them",
			segs:     []groSeg{{plen: 10}, {plen: 10, badICRC: true}, {plen: 10}},
			numbered: true, posted: 1, wcs: 1, drops: soft.Drops{BadICRC: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newEndpoint(t, verbs.QPConfig{GRO: true})
			dst := a.qp.UnicastIP()
			read, seg, payloads := coalesced(t, a.qp, tt.segs, src, dst, sport, tt.numbered)
			var good [][]byte
			for j, s := range tt.segs {
				if !s.badICRC && !s.badQKey {
					good = append(good, payloads[j])
				}
			}
			a.postRecvs(0, tt.posted)
			posted := tt.posted
			require.NoError(t, soft.InjectCoalesced(a.qp, 1, read, seg, src, sport, dst))
			var got []verbs.WC
			wcs := make([]verbs.WC, tt.wcs)
			for range 4 * len(tt.segs) {
				k, err := a.qp.RecvCQ().Poll(wcs)
				require.NoError(t, err)
				require.LessOrEqual(t, k, len(wcs))
				got = append(got, wcs[:k]...)
				if k == 0 {
					if len(got) == len(good) {
						break
					}
					// Out of receives: what is left waits for more.
					require.Equal(t, posted, len(got), "a Poll found nothing with receives posted")
					a.postRecvs(posted, 1)
					posted++
				}
			}
			require.Len(t, got, len(good), "completions")
			for i, wc := range got {
				require.Equal(t, verbs.WCSuccess, wc.Status)
				require.Equal(t, uint64(i), wc.WRID, "completion %d: receives complete in the order posted", i)
				buf := a.buf(wc)
				require.True(t, bytes.Equal(good[i], buf[verbs.GRHSize:]), "completion %d: payload differs", i)
				assert.Equal(t, src, [4]byte(buf[32:36]), "GRH source")
				assert.Equal(t, dst, [4]byte(buf[36:40]), "GRH destination")
				assert.Equal(t, uint32(0x4242), wc.SrcQP)
			}
			if tt.numbered && tt.drops == (soft.Drops{}) {
				for i, wc := range got {
					assert.Equal(t, uint16(i), binary.BigEndian.Uint16(a.buf(wc)[24:]), "GRH IP ID of datagram %d", i)
				}
			}
			assert.Equal(t, tt.drops, a.drops(), "each bad datagram dropped and counted on its own")
			reads, dgrams := soft.GROReads(a.qp)
			if len(tt.segs) > 1 {
				assert.Equal(t, [2]uint64{1, uint64(len(tt.segs))}, [2]uint64{reads, dgrams}, "coalesced reads, datagrams")
			} else {
				assert.Equal(t, [2]uint64{0, 0}, [2]uint64{reads, dgrams}, "a lone datagram is no coalesced read")
			}
		})
	}
}

// A run sent with UDP GSO arrives as one read at every QP that receives
// it, multicast (three QPs in the group) and unicast, split into its
// datagrams in order, once runs have been arriving (the first is cut by
// the kernel, and its later segments turn GRO on); the sender's own copy
// is dropped whole in the kernel by the self filter.
func TestWriteBatchArrivesCoalesced(t *testing.T) {
	const batch, size = 32, 1024
	s := newEndpoint(t, verbs.QPConfig{SendDepth: 64, BlockSelfMulticastLoopback: true, GRO: true})
	var rx [3]*endpoint
	var m verbs.Membership
	for i := range rx {
		rx[i] = newEndpoint(t, verbs.QPConfig{GRO: true, GRHAddressesOnly: i == 1}) // bare reads too
		m, _ = rx[i].join("239.201.9.1", false)
		rx[i].postRecvs(0, nBufs)
	}
	_, gah := s.join("239.201.9.1", false) // a full member: loopback comes back to it
	s.postRecvs(0, nBufs)
	postBatch := func(ah verbs.AH, qpn, qkey uint32, tag byte) {
		wrs := make([]verbs.SendWR, batch)
		for i := range wrs {
			b := s.sendBuf(i)[:size]
			for j := range b {
				b[j] = tag + byte(i) + byte(j)
			}
			wrs[i] = verbs.SendWR{WRID: uint64(i), SGE: s.sendSGE(i, size), AH: ah, RemoteQPN: qpn, RemoteQKey: qkey}
		}
		k, err := s.qp.PostSend(wrs)
		require.NoError(t, err)
		require.Equal(t, batch, k)
	}
	check := func(e *endpoint, tag byte, first int) {
		t.Helper()
		wcs := e.recv(batch, 2*time.Second)
		require.Len(t, wcs, batch)
		for i, wc := range wcs {
			require.Equal(t, uint64(first+i), wc.WRID)
			p := e.buf(wc)[verbs.GRHSize:]
			require.Len(t, p, size)
			for j := range p {
				if p[j] != tag+byte(i)+byte(j) {
					t.Fatalf("datagram %d byte %d: %#x, want %#x", i, j, p[j], tag+byte(i)+byte(j))
				}
			}
		}
	}
	for i := range rx {
		require.Equal(t, [2]bool{false, false}, soft.GROActive(rx[i].qp), "UDP_GRO before runs arrive")
	}
	postBatch(gah, m.RemoteQPN, m.QKey, 0)
	for i, e := range rx {
		check(e, 0, 0)
		e.postRecvs(0, batch)
		require.Equal(t, [2]bool{true, false}, soft.GROActive(e.qp), "QP %d: UDP_GRO on the multicast socket once a run came", i)
	}
	postBatch(gah, m.RemoteQPN, m.QKey, 1)
	for i, e := range rx {
		check(e, 1, batch)
		reads, dgrams := soft.GROReads(e.qp)
		assert.Equal(t, [2]uint64{1, batch}, [2]uint64{reads, dgrams}, "QP %d: one coalesced read of the batch", i)
		assert.Zero(t, dropTotal(e.drops()), "QP %d drops", i)
	}
	assert.Empty(t, s.recv(1, 100*time.Millisecond), "the sender got its own multicast back")
	if soft.SelfFiltered(s.qp) {
		assert.Zero(t, s.qp.Drops().Self, "the self filter let copies through to be dropped in Go")
	}

	// Unicast: to rx[0]'s QP.
	uah, err := s.qp.CreateAH(verbs.AHAttr{DGID: rx[0].id.Local().GID, IsGlobal: true, HopLimit: 64})
	require.NoError(t, err)
	postBatch(uah, rx[0].qp.QPN(), rx[0].qp.QKey(), 5)
	check(rx[0], 5, 0)
	require.Equal(t, [2]bool{true, true}, soft.GROActive(rx[0].qp), "UDP_GRO on the unicast socket once a run came")
	rx[0].postRecvs(0, nBufs)
	postBatch(uah, rx[0].qp.QPN(), rx[0].qp.QKey(), 7)
	check(rx[0], 7, 0)
	reads, dgrams := soft.GROReads(rx[0].qp)
	assert.Equal(t, [2]uint64{2, 2 * batch}, [2]uint64{reads, dgrams}, "one more coalesced read, unicast")
}

// UDP_GRO is on only where runs arrive, and off while no receive is
// posted, so that what the socket buffer cannot hold then is dropped (and
// counted) datagram by datagram: from a Poll that finds no receive posted
// until receives are posted again, and from a run that used the last
// receives posted (a PostRecv of none posts none). Single datagrams
// (request/response) never turn it on.
func TestGROOnlyWhereRunsArrive(t *testing.T) {
	const batch = 8
	s := newEndpoint(t, verbs.QPConfig{SendDepth: 64})
	a := newEndpoint(t, verbs.QPConfig{GRO: true})
	a.postRecvs(0, 3+batch) // all that the datagrams below use
	for range 3 {
		s.unicastTo(a, []byte("x"))
	}
	assert.Equal(t, [2]bool{false, false}, soft.GROActive(a.qp), "after single datagrams")
	s.runTo(a, batch, 100)
	require.Len(t, a.recv(batch, 2*time.Second), batch)
	assert.Equal(t, [2]bool{false, false}, soft.GROActive(a.qp), "after a run that used the last receive")
	a.postRecvs(0, nBufs)
	assert.Equal(t, [2]bool{false, true}, soft.GROActive(a.qp), "receives posted, on the socket the run came to")

	soft.FlushRecvs(a.qp)
	var wcs [1]verbs.WC
	n, err := a.qp.RecvCQ().Poll(wcs[:])
	require.NoError(t, err)
	require.Zero(t, n)
	assert.Equal(t, [2]bool{false, false}, soft.GROActive(a.qp), "after a Poll with no receive posted")
	k, err := a.qp.PostRecv(nil)
	require.NoError(t, err)
	require.Zero(t, k)
	assert.Equal(t, [2]bool{false, false}, soft.GROActive(a.qp), "after a PostRecv of no receive")
	a.postRecvs(0, 1)
	assert.Equal(t, [2]bool{false, true}, soft.GROActive(a.qp), "receives posted again")
}

// A run that leaves one receive posted turns UDP_GRO on: only a run that
// used the last receives keeps it off. The run is of two, and three
// receives are posted, so that whether it is read in one read or two, the
// read that holds its later segment leaves exactly one.
func TestGROOnWithOneReceiveLeft(t *testing.T) {
	const batch = 2
	s := newEndpoint(t, verbs.QPConfig{SendDepth: 64})
	a := newEndpoint(t, verbs.QPConfig{GRO: true})
	a.postRecvs(0, batch+1)
	s.runTo(a, batch, 100)
	require.Len(t, a.recv(batch, 2*time.Second), batch, "the run's datagrams")
	assert.Equal(t, [2]bool{false, true}, soft.GROActive(a.qp), "after a run that left one receive posted")
}

// TestGROOnlyWhereRunsArrive on the multicast socket: a run to a group
// turns UDP_GRO on there, and a Poll that finds no receive posted turns it
// off until receives are posted again.
func TestGROOffWithoutReceivesMulticast(t *testing.T) {
	const batch, group = 8, "239.201.9.31"
	s := newEndpoint(t, verbs.QPConfig{SendDepth: 64})
	a := newEndpoint(t, verbs.QPConfig{GRO: true})
	a.postRecvs(0, nBufs)
	m, _ := a.join(group, false)
	_, ah := s.join(group, true)
	wrs := make([]verbs.SendWR, batch)
	for i := range wrs {
		wrs[i] = verbs.SendWR{WRID: uint64(i), SGE: s.sendSGE(i, 100), AH: ah, RemoteQPN: m.RemoteQPN, RemoteQKey: m.QKey}
	}
	k, err := s.qp.PostSend(wrs)
	require.NoError(t, err)
	require.Equal(t, batch, k)
	require.Len(t, a.recv(batch, 2*time.Second), batch)
	require.Equal(t, [2]bool{true, false}, soft.GROActive(a.qp), "after a run to the group")

	soft.FlushRecvs(a.qp)
	var wcs [1]verbs.WC
	n, err := a.qp.RecvCQ().Poll(wcs[:])
	require.NoError(t, err)
	require.Zero(t, n)
	assert.Equal(t, [2]bool{false, false}, soft.GROActive(a.qp), "after a Poll with no receive posted")
	a.postRecvs(0, 1)
	assert.Equal(t, [2]bool{true, false}, soft.GROActive(a.qp), "receives posted again")
}

// groQuiet is a sender and a receiver whose unicast socket has UDP_GRO
// on, its count of quiet reads at 0: a run the kernel cut turned GRO on,
// and a second run came coalesced, in one read. Of the receiver's nBufs
// receives, all but the two runs' are posted.
type groQuiet struct {
	s, a *endpoint
	ah   verbs.AH
}

func newGROQuiet(t *testing.T) *groQuiet {
	t.Helper()
	s := newEndpoint(t, verbs.QPConfig{SendDepth: 64})
	return groQuietBetween(t, s, newEndpoint(t, verbs.QPConfig{GRO: true}))
}

// groQuietBetween is newGROQuiet of sender s (SendDepth 64 or more) and
// receiver a (QPConfig.GRO).
func groQuietBetween(t *testing.T, s, a *endpoint) *groQuiet {
	t.Helper()
	const batch = 8
	a.postRecvs(0, nBufs)
	ah, err := s.qp.CreateAH(verbs.AHAttr{DGID: a.id.Local().GID, IsGlobal: true, HopLimit: 64})
	require.NoError(t, err)
	wrs := make([]verbs.SendWR, batch)
	for i := range wrs {
		wrs[i] = verbs.SendWR{WRID: uint64(i), SGE: s.sendSGE(i, 100), AH: ah, RemoteQPN: a.qp.QPN(), RemoteQKey: a.qp.QKey()}
	}
	// The first run, cut by the kernel, turns GRO on; the second comes
	// coalesced, in one read, which starts the count.
	for run := range 2 {
		k, err := s.qp.PostSend(wrs)
		require.NoError(t, err)
		require.Equal(t, batch, k)
		require.Len(t, a.recv(batch, 2*time.Second), batch, "run %d", run)
		require.Equal(t, [2]bool{false, true}, soft.GROActive(a.qp), "after run %d", run)
	}
	reads, dgrams := soft.GROReads(a.qp)
	require.Equal(t, [2]uint64{1, batch}, [2]uint64{reads, dgrams}, "the second run: one coalesced read")
	return &groQuiet{s: s, a: a, ah: ah}
}

// lone sends a datagram alone, reads it (a quiet read) and posts its
// buffer again.
func (g *groQuiet) lone(t *testing.T, i int) {
	t.Helper()
	g.s.send(g.ah, g.a.qp.QPN(), []byte{byte(i)}, 0, 0)
	got := g.a.recv(1, 2*time.Second)
	require.Len(t, got, 1, "lone datagram %d", i)
	require.Equal(t, []byte{byte(i)}, g.a.buf(got[0])[verbs.GRHSize:])
	g.a.postRecvs(int(got[0].WRID), 1)
}

// groQuietReads is how many reads with UDP_GRO on and none coalesced turn
// it off: the package doc's "GRO goes off after 256 reads with no run".
const groQuietReads = 256

// quietUntilOff reads lone datagrams with GRO on and its count at 0: it
// must stay on for groQuietReads - 1 of them and go off with the next.
func (g *groQuiet) quietUntilOff(t *testing.T) {
	t.Helper()
	before, _ := soft.GROReads(g.a.qp)
	for i := range groQuietReads - 1 {
		g.lone(t, i)
	}
	reads, _ := soft.GROReads(g.a.qp)
	require.Equal(t, before, reads, "a lone datagram read coalesced")
	require.Equal(t, [2]bool{false, true}, soft.GROActive(g.a.qp), "GRO off after %d quiet reads", groQuietReads-1)
	g.lone(t, groQuietReads-1)
	require.Equal(t, [2]bool{false, false}, soft.GROActive(g.a.qp), "GRO on after %d quiet reads", groQuietReads)
}

// UDP_GRO goes off after groQuietReads (256) reads of the socket it is
// on with none coalesced, counted from the last coalesced read: on after
// one fewer, off after that many.
func TestGROOffAfterQuietReads(t *testing.T) {
	newGROQuiet(t).quietUntilOff(t)
}

// UDP_GRO goes on for a socket at fd 0 as for any other: here the
// receiver's unicast socket, made with fd 0 free (stdin closed).
func TestGROOnSocketAtFd0(t *testing.T) {
	s := newEndpoint(t, verbs.QPConfig{SendDepth: 64})
	withFd0Closed(t, func() {
		a := newEndpoint(t, verbs.QPConfig{GRO: true})
		defer a.id.Close() // before fd 0 is given back
		require.Zero(t, soft.UnicastFd(a.qp), "the receiver's unicast socket")
		groQuietBetween(t, s, a)
	})
}

// The count of quiet reads starts again from 0 when GRO goes on: quiet
// reads before a Poll with no receive posted turned it off, and the
// posting that turned it back on, do not count.
func TestGROQuietCountRestartsWhenOn(t *testing.T) {
	g := newGROQuiet(t)
	for i := range 10 {
		g.lone(t, i)
	}
	soft.FlushRecvs(g.a.qp)
	var wcs [1]verbs.WC
	n, err := g.a.qp.RecvCQ().Poll(wcs[:])
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, [2]bool{false, false}, soft.GROActive(g.a.qp), "after a Poll with no receive posted")
	g.a.postRecvs(0, nBufs)
	require.Equal(t, [2]bool{false, true}, soft.GROActive(g.a.qp), "receives posted again")
	g.quietUntilOff(t)
}

// An nftables rule that drops a GSO run drops it whole, with or without
// GRO (it sees the run as one skb before the socket); the runs it lets
// through arrive whole.
func TestNftDropsWholeRuns(t *testing.T) {
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("nft not found: apt-get install nftables")
	}
	if !testenv.InOwnNetns(t) {
		return
	}
	for _, args := range [][]string{
		{"add", "table", "inet", "grotest"},
		{"add", "chain", "inet", "grotest", "in", "{ type filter hook input priority 0; }"},
	} {
		out, err := exec.Command("nft", args...).CombinedOutput()
		require.NoError(t, err, "nft %v: %s", args, out)
	}
	const batch, runs = 16, 4
	s := newEndpoint(t, verbs.QPConfig{SendDepth: 64})
	a := newEndpoint(t, verbs.QPConfig{GRO: true})
	a.postRecvs(0, nBufs)
	ah, err := s.qp.CreateAH(verbs.AHAttr{DGID: a.id.Local().GID, IsGlobal: true, HopLimit: 64})
	require.NoError(t, err)
	for r := range runs + 1 {
		if r == 1 {
			// The first run, cut by the kernel, turned GRO on.
			require.Len(t, a.recv(batch, 2*time.Second), batch)
			require.Equal(t, [2]bool{false, true}, soft.GROActive(a.qp))
			a.postRecvs(0, nBufs)
			out, err := exec.Command("nft", "add", "rule", "inet", "grotest", "in", "udp", "dport", "4791",
				"numgen", "inc", "mod", "2", "==", "0", "counter", "drop").CombinedOutput()
			require.NoError(t, err, "nft: %s", out)
		}
		wrs := make([]verbs.SendWR, batch)
		for i := range wrs {
			s.sendBuf(i)[0] = byte(r)
			wrs[i] = verbs.SendWR{WRID: uint64(i), SGE: s.sendSGE(i, 100), AH: ah, RemoteQPN: a.qp.QPN(), RemoteQKey: a.qp.QKey()}
		}
		k, err := s.qp.PostSend(wrs)
		require.NoError(t, err)
		require.Equal(t, batch, k)
	}
	wcs := a.recv(runs*batch, 500*time.Millisecond)
	require.Len(t, wcs, runs/2*batch, "every other run dropped whole")
	for i, wc := range wcs {
		assert.Equal(t, wcs[i/batch*batch].WRID/batch, wc.WRID/batch)
		assert.Equal(t, a.buf(wcs[i/batch*batch])[verbs.GRHSize], a.buf(wc)[verbs.GRHSize], "datagram %d is from another run than its run's first", i)
	}
	reads, dgrams := soft.GROReads(a.qp)
	assert.Equal(t, [2]uint64{runs / 2, runs / 2 * batch}, [2]uint64{reads, dgrams})
}

// Without QPConfig.GRO a QP never turns UDP_GRO on: runs arrive cut into
// their datagrams, and what a full socket buffer drops counts each one.
func TestGROOffByDefault(t *testing.T) {
	const batch, size = 32, 1024
	s := newEndpoint(t, verbs.QPConfig{SendDepth: 64})
	a := newEndpoint(t, verbs.QPConfig{})
	m, _ := a.join("239.201.9.7", false)
	_, gah := s.join("239.201.9.7", true)
	for round := 0; round < 3; round++ {
		a.postRecvs(0, batch)
		wrs := make([]verbs.SendWR, batch)
		for i := range wrs {
			wrs[i] = verbs.SendWR{WRID: uint64(i), SGE: s.sendSGE(i, size), AH: gah, RemoteQPN: m.RemoteQPN, RemoteQKey: m.QKey}
		}
		k, err := s.qp.PostSend(wrs)
		require.NoError(t, err)
		require.Equal(t, batch, k)
		require.Len(t, a.recv(batch, 2*time.Second), batch, "round %d", round)
	}
	require.Equal(t, [2]bool{false, false}, soft.GROActive(a.qp), "UDP_GRO without QPConfig.GRO")
	reads, _ := soft.GROReads(a.qp)
	require.Zero(t, reads, "coalesced reads without QPConfig.GRO")
}

// Receive buffers with room for the largest datagram take each one in
// place, one iovec, with the GRO area's row behind it: a run read in
// place, coalesced, splits into its datagrams whole (each slot's region
// is the in-place buffer's, not the scratch iovecs' of a scattered
// read), whether it fits the region or spills into the row's overflow,
// and so does a lone datagram read in place after them. So it goes for
// Polls of a batch and, on a GRHAddressesOnly QP, for bare reads of one
// slot a Poll (recvmsg, as the row and UDP_GRO's message need: recvfrom
// takes a lone in-place datagram only where no row follows).
func TestCoalescedReadInPlace(t *testing.T) {
	for _, tc := range []struct {
		name     string
		addrOnly bool
		width    int // completions a Poll
	}{
		{"batches", false, 64},
		{"GRHAddressesOnly-one-a-Poll", true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) { testCoalescedReadInPlace(t, tc.addrOnly, tc.width) })
	}
}

func testCoalescedReadInPlace(t *testing.T, addrOnly bool, width int) {
	const batch = 8
	s := newEndpoint(t, verbs.QPConfig{SendDepth: 64})
	a := newEndpoint(t, verbs.QPConfig{GRO: true, GRHAddressesOnly: addrOnly})
	// Two of the arena's receive buffers each: past GRH + MTU + 11.
	big := 2 * bufSize
	require.Greater(t, big, verbs.GRHSize+a.id.Local().MTU+roce.ImmDtSize+3+roce.ICRCSize, "an in-place buffer")
	wrs := make([]verbs.RecvWR, nBufs/2)
	for i := range wrs {
		wrs[i] = verbs.RecvWR{WRID: uint64(i), SGE: verbs.SGE{Offset: uint32(i * big), Length: uint32(big), LKey: a.mr.LKey()}}
	}
	k, err := a.qp.PostRecv(wrs)
	require.NoError(t, err)
	require.Equal(t, len(wrs), k)
	ah, err := s.qp.CreateAH(verbs.AHAttr{DGID: a.id.Local().GID, IsGlobal: true, HopLimit: 64})
	require.NoError(t, err)
	send := func(n, size int, tag byte) {
		wrs := make([]verbs.SendWR, n)
		for i := range wrs {
			b := s.sendBuf(i)[:size]
			for j := range b {
				b[j] = tag + byte(i) + byte(j)
			}
			wrs[i] = verbs.SendWR{WRID: uint64(i), SGE: s.sendSGE(i, size), AH: ah, RemoteQPN: a.qp.QPN(), RemoteQKey: a.qp.QKey()}
		}
		k, err := s.qp.PostSend(wrs)
		require.NoError(t, err)
		require.Equal(t, n, k)
	}
	check := func(n, size int, tag byte, first int) {
		t.Helper()
		wcs := a.recvBy(width, n, 2*time.Second)
		require.Len(t, wcs, n, "completions of tag %d (drops %+v)", tag, a.qp.Drops())
		for i, wc := range wcs {
			require.Equal(t, verbs.WCSuccess, wc.Status)
			require.Equal(t, uint64(first+i), wc.WRID)
			p := a.arena.Slice(uint32(int(wc.WRID)*big), wc.ByteLen)[verbs.GRHSize:]
			require.Len(t, p, size)
			for j := range p {
				if p[j] != tag+byte(i)+byte(j) {
					t.Fatalf("tag %d datagram %d byte %d: %#x, want %#x", tag, i, j, p[j], tag+byte(i)+byte(j))
				}
			}
		}
	}
	send(batch, 300, 0) // turns UDP_GRO on
	check(batch, 300, 0, 0)
	require.Equal(t, [2]bool{false, true}, soft.GROActive(a.qp), "UDP_GRO on after a run")
	send(batch, 300, 1) // 2.6 KB: within the in-place region
	check(batch, 300, 1, batch)
	reads, dgrams := soft.GROReads(a.qp)
	assert.Equal(t, [2]uint64{1, batch}, [2]uint64{reads, dgrams}, "one coalesced read of the run")
	send(batch, 1000, 2) // 8.4 KB: past the region, into the overflow
	check(batch, 1000, 2, 2*batch)
	reads, dgrams = soft.GROReads(a.qp)
	assert.Equal(t, [2]uint64{2, 2 * batch}, [2]uint64{reads, dgrams}, "one coalesced read of the spilled run")
	send(1, 300, 3)
	check(1, 300, 3, 3*batch)
	assert.Zero(t, dropTotal(a.drops()), "drops")
	if addrOnly {
		assert.NotZero(t, soft.BareReads(a.qp), "bare reads")
	}
}

// A receive CQ holds a GRO area (4 MiB of address space, from a pool of
// 64 before areas are mapped one by one) only while a read can use it: a
// Poll whose batch read of a GRO socket comes back empty gives it back.
// Here the first read takes the scratch's 8 slots, lone datagrams each,
// and the second finds the socket dry.
func TestGROAreaGivenBackWhenDry(t *testing.T) {
	s := newEndpoint(t, verbs.QPConfig{SendDepth: 64})
	a := newEndpoint(t, verbs.QPConfig{GRO: true})
	a.postRecvs(0, nBufs)
	ah, err := s.qp.CreateAH(verbs.AHAttr{DGID: a.id.Local().GID, IsGlobal: true, HopLimit: 64})
	require.NoError(t, err)
	const run = 4 // under the scratch's 8: no bigger scratch
	s.runTo(a, run, 100)
	require.Len(t, a.recv(run, 2*time.Second), run)
	require.Equal(t, [2]bool{false, true}, soft.GROActive(a.qp), "UDP_GRO on after a run")

	// Loopback delivers a datagram in its sender's send unless softirqs
	// are deferred (a loaded machine): then the 8 may straddle the read,
	// which finds fewer than its slots and stops; try again.
	wcs := make([]verbs.WC, 32)
	for try := 0; ; try++ {
		for i := range 8 {
			s.send(ah, a.qp.QPN(), []byte{byte(i)}, 0, 0)
		}
		waitUnread(t, a)
		n, err := a.qp.RecvCQ().Poll(wcs)
		require.NoError(t, err)
		if n == 8 {
			break
		}
		if try == 5 { // 60 receives posted: 7 tries' worth
			t.Skipf("the 8 datagrams never arrived before one read (%d read)", n)
		}
		require.Len(t, a.recv(8-n, 2*time.Second), 8-n)
	}
	assert.False(t, soft.GROAreaHeld(a.qp), "the GRO area held after a read that found the socket dry")
}

// The same for a one-slot read: a Poll after a wake, with room for one
// completion, reads one datagram where the last came from (here the
// unicast socket, with GRO on) by recvmsg, with no look at readiness
// first; a wake with nothing there (a spurious one) finds the socket
// dry, and the area goes back too.
func TestGROAreaGivenBackWhenDryOneSlot(t *testing.T) {
	s := newEndpoint(t, verbs.QPConfig{SendDepth: 64})
	a := newEndpoint(t, verbs.QPConfig{GRO: true})
	const run = 4
	a.postRecvs(0, 2*run)
	s.runTo(a, run, 100)
	require.Len(t, a.recv(run, 2*time.Second), run)
	require.Equal(t, [2]bool{false, true}, soft.GROActive(a.qp), "UDP_GRO on after a run")
	var wcs [1]verbs.WC // one slot, whatever the pace
	n, err := soft.PollRecvWoken(a.qp, wcs[:])
	require.NoError(t, err)
	require.Zero(t, n, "completions with nothing sent")
	assert.False(t, soft.GROAreaHeld(a.qp), "the GRO area held after a one-slot read that found the socket dry")
}

// A Poll whose read of a socket with GRO cannot map the read's GRO area
// (RLIMIT_AS) fails with mmap's errno and completes nothing; the
// datagram waits, and the next Poll with the limit raised completes it.
func TestPollGROAreaMapFails(t *testing.T) {
	if !testenv.InChild(t) {
		return
	}
	g := newGROQuiet(t)
	g.s.send(g.ah, g.a.qp.QPN(), []byte("after"), 0, 0)
	waitUnread(t, g.a)
	restore, err := soft.NoGROArea()
	require.NoError(t, err)
	var wcs [4]verbs.WC
	n, err := g.a.qp.RecvCQ().Poll(wcs[:])
	restore()
	assert.Zero(t, n, "completions from a Poll with no GRO area")
	require.ErrorIs(t, err, unix.ENOMEM, "Poll with no GRO area to map")
	assert.ErrorContains(t, err, "mmap")
	got := g.a.recv(1, 2*time.Second)
	require.Len(t, got, 1, "the datagram, once the area maps")
	assert.Equal(t, []byte("after"), g.a.buf(got[0])[verbs.GRHSize:])
}

// waitUnread waits until e's receive CQ has a datagram to read.
func waitUnread(t *testing.T, e *endpoint) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		if pending, _ := e.qp.RecvCQ().Unread(); pending {
			return
		}
		require.True(t, time.Now().Before(deadline), "no datagram arrived")
		time.Sleep(time.Millisecond)
	}
}

// TestCoalescedReadTruncated: a coalesced read the kernel cut (longer
// than a GRO row) completes none of its datagrams and counts one
// TooLong; the next read is taken as before.
func TestCoalescedReadTruncated(t *testing.T) {
	src, sport := [4]byte{127, 0, 0, 1}, uint16(0xC124)
	a := newEndpoint(t, verbs.QPConfig{GRO: true})
	dst := a.qp.UnicastIP()
	read, seg, _ := coalesced(t, a.qp, []groSeg{{plen: 64}, {plen: 64}, {plen: 64}}, src, dst, sport, true)
	a.postRecvs(0, 8)
	require.NoError(t, soft.InjectCoalescedTruncated(a.qp, 1, read, seg, src, sport, dst))
	wcs := make([]verbs.WC, 8)
	n, err := a.qp.RecvCQ().Poll(wcs)
	require.NoError(t, err)
	require.Equal(t, 0, n, "got %d completions of a truncated read, want 0", n)
	require.Equal(t, soft.Drops{TooLong: 1}, a.drops(), "got drops %+v, want one TooLong", a.drops())
	require.NoError(t, soft.InjectCoalesced(a.qp, 1, read, seg, src, sport, dst))
	n, err = a.qp.RecvCQ().Poll(wcs)
	require.NoError(t, err)
	require.Equal(t, 3, n, "got %d completions of the next read, want 3", n)
}

// TestCloseGivesBackPendingGROArea: a QP closed with datagrams of a
// coalesced read still pending (no receive posted for them) forgets them
// and gives its GRO area back to the pool.
func TestCloseGivesBackPendingGROArea(t *testing.T) {
	src, sport := [4]byte{127, 0, 0, 1}, uint16(0xC125)
	a := newEndpoint(t, verbs.QPConfig{GRO: true})
	dst := a.qp.UnicastIP()
	read, seg, _ := coalesced(t, a.qp, []groSeg{{plen: 64}, {plen: 64}, {plen: 64}}, src, dst, sport, true)
	a.postRecvs(0, 1)
	require.NoError(t, soft.InjectCoalesced(a.qp, 1, read, seg, src, sport, dst))
	wcs := make([]verbs.WC, 8)
	n, err := a.qp.RecvCQ().Poll(wcs)
	require.NoError(t, err)
	require.Equal(t, 1, n, "completions with one receive posted")
	require.True(t, soft.GROAreaHeld(a.qp), "no GRO area held with two datagrams pending")
	require.NoError(t, a.id.Close())
	require.False(t, soft.GROAreaHeld(a.qp), "the GRO area still held after the QP's close")
}

// The control room of a read (ctrlSize) holds all five messages a
// datagram can come with: a coalesced read (UDP_GRO), after the socket
// dropped datagrams (SO_RXQ_OVFL, on every datagram queued since), on a
// QP that reads IP_TTL, IP_TOS and IP_ORIGDSTADDR, which the kernel puts
// last. Each datagram of the run completes with its group as the GRH
// destination.
func TestCoalescedReadAfterDropsHasEveryControlMessage(t *testing.T) {
	const group, size = "239.201.9.7", 1024
	s := newEndpoint(t, verbs.QPConfig{SendDepth: 64})
	a := newEndpoint(t, verbs.QPConfig{GRO: true})
	m, _ := a.join(group, false)
	_, ah := s.join(group, true)
	wrs := make([]verbs.SendWR, 64)
	for i := range wrs {
		wrs[i] = verbs.SendWR{WRID: uint64(i), SGE: s.sendSGE(i, size), AH: ah, RemoteQPN: m.RemoteQPN, RemoteQKey: m.QKey}
	}
	run := func() {
		t.Helper()
		n, err := s.qp.PostSend(wrs)
		require.NoError(t, err)
		require.Equal(t, len(wrs), n)
	}
	// A run turns GRO on.
	a.postRecvs(0, nBufs)
	run()
	require.Len(t, a.recv(nBufs, 2*time.Second), nBufs)
	// Runs far past the socket buffer, no receive posted: drops.
	for range 190 {
		run()
	}
	for {
		a.postRecvs(0, nBufs)
		if len(a.recv(nBufs, 200*time.Millisecond)) < nBufs {
			break
		}
	}
	require.NotZero(t, a.qp.Drops().Overflow, "no drop to report")
	a.postRecvs(0, nBufs)
	require.Equal(t, [2]bool{true, false}, soft.GROActive(a.qp), "UDP_GRO on the multicast socket")
	reads, _ := soft.GROReads(a.qp)
	run()
	wcs := a.recv(nBufs, 2*time.Second)
	require.Len(t, wcs, nBufs, "drops %+v", a.qp.Drops())
	after, _ := soft.GROReads(a.qp)
	require.Greater(t, after, reads, "no coalesced read")
	for i, wc := range wcs {
		require.Equal(t, verbs.WCSuccess, wc.Status, "datagram %d", i)
		require.Equal(t, [4]byte(net.ParseIP(group).To4()), [4]byte(a.buf(wc)[36:40]), "datagram %d: GRH destination", i)
	}
}

// Once UDP_GRO went off, a socket's reads take GRO overflow rows (and an
// area) only until a read finds it dry: runs queued before may still be
// coalesced, none after that. Here the receiver's unicast socket, after
// its 256 quiet reads, read dry by a Poll as after a wake.
func TestGROAreasEndWhenReadDryAfterOff(t *testing.T) {
	g := newGROQuiet(t)
	g.quietUntilOff(t)
	require.Equal(t, [2]bool{false, true}, soft.GROOn(g.a.qp), "overflow rows for the unicast socket before it was read dry")
	var wcs [4]verbs.WC
	n, err := soft.PollRecvWoken(g.a.qp, wcs[:])
	require.NoError(t, err)
	require.Zero(t, n, "completions with nothing sent")
	require.Equal(t, [2]bool{false, false}, soft.GROOn(g.a.qp), "overflow rows for the unicast socket once read dry with GRO off")
}

// TestCoalescedReadExactFit: the datagrams of a coalesced read are
// copied into posted buffers that hold exactly their GRH and payload; a
// buffer a byte shorter takes none (each datagram tried there is dropped
// as TooLong, and the receive stays posted).
func TestCoalescedReadExactFit(t *testing.T) {
	src, sport := [4]byte{127, 0, 0, 1}, uint16(0xC126)
	const plen = 100
	for _, c := range []struct {
		name  string
		size  int // of each posted buffer
		wcs   int
		drops soft.Drops
	}{
		{"exact", verbs.GRHSize + plen, 3, soft.Drops{}},
		{"a byte short", verbs.GRHSize + plen - 1, 0, soft.Drops{TooLong: 3}},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := newEndpoint(t, verbs.QPConfig{GRO: true})
			dst := a.qp.UnicastIP()
			read, seg, payloads := coalesced(t, a.qp, []groSeg{{plen: plen}, {plen: plen}, {plen: plen}}, src, dst, sport, true)
			for i := range 3 {
				sge := a.recvSGE(i)
				sge.Length = uint32(c.size)
				k, err := a.qp.PostRecv([]verbs.RecvWR{{WRID: uint64(i), SGE: sge}})
				require.NoError(t, err)
				require.Equal(t, 1, k)
			}
			require.NoError(t, soft.InjectCoalesced(a.qp, 1, read, seg, src, sport, dst))
			var wcs []verbs.WC
			for range 4 { // a Poll ends at a drop: the rest wait for the next
				w := make([]verbs.WC, 8)
				n, err := a.qp.RecvCQ().Poll(w)
				require.NoError(t, err)
				wcs = append(wcs, w[:n]...)
			}
			require.Len(t, wcs, c.wcs, "completions")
			for i, wc := range wcs {
				require.Equal(t, verbs.WCSuccess, wc.Status, "completion %d", i)
				require.Equal(t, uint64(i), wc.WRID, "completion %d", i)
				require.Equal(t, uint32(verbs.GRHSize+plen), wc.ByteLen, "completion %d", i)
				require.Equal(t, payloads[i], a.buf(wc)[verbs.GRHSize:], "completion %d", i)
			}
			require.Equal(t, c.drops, a.drops(), "drops")
		})
	}
}

// TestCoalescedScatteredReadKeepsEveryDatagram: a coalesced read into
// buffers too short for a datagram in place (bufSize: GRH + 4096, the
// MTU, with no room for ImmDt, pad and ICRC) is scattered over the
// header scratch, the buffer and the tail scratch, and the rest of the run
// goes to the slot's GRO row, the read's fourth iovec. Every datagram of
// the run comes out of it, counted once the QP has nothing unread: a run
// sent with GSO arrives whole, so what the QP completed then is all it
// will.
func TestCoalescedScatteredReadKeepsEveryDatagram(t *testing.T) {
	const batch, size, group = 32, 1024, "239.201.9.41"
	s := newEndpoint(t, verbs.QPConfig{SendDepth: 64, BlockSelfMulticastLoopback: true, GRO: true})
	b := newEndpoint(t, verbs.QPConfig{GRO: true})
	m, _ := b.join(group, false)
	_, gah := s.join(group, false)
	b.postRecvs(0, nBufs)
	send := func(tag byte) {
		t.Helper()
		wrs := make([]verbs.SendWR, batch)
		for i := range wrs {
			p := s.sendBuf(i)[:size]
			for j := range p {
				p[j] = tag + byte(i) + byte(j)
			}
			wrs[i] = verbs.SendWR{WRID: uint64(i), SGE: s.sendSGE(i, size), AH: gah, RemoteQPN: m.RemoteQPN, RemoteQKey: m.QKey}
		}
		k, err := s.qp.PostSend(wrs)
		require.NoError(t, err)
		require.Equal(t, batch, k)
	}
	drain := func(tag byte, first int) {
		t.Helper()
		waitUnread(t, b)
		var got []verbs.WC
		wcs := make([]verbs.WC, nBufs)
		for polls := 0; ; polls++ {
			require.Less(t, polls, 10*batch, "Polls went on finding datagrams: %d of %d completed", len(got), batch)
			n, err := b.qp.RecvCQ().Poll(wcs)
			require.NoError(t, err)
			got = append(got, wcs[:n]...)
			if pending, _ := b.qp.RecvCQ().Unread(); !pending {
				break
			}
		}
		require.Len(t, got, batch, "datagrams completed once nothing was unread; drops %+v", b.drops())
		for i, wc := range got {
			require.Equal(t, verbs.WCSuccess, wc.Status)
			require.Equal(t, uint64(first+i), wc.WRID)
			p := b.buf(wc)[verbs.GRHSize:]
			require.Len(t, p, size)
			for j := range p {
				if p[j] != tag+byte(i)+byte(j) {
					t.Fatalf("datagram %d byte %d: %#x, want %#x", i, j, p[j], tag+byte(i)+byte(j))
				}
			}
		}
		require.Zero(t, dropTotal(b.drops()), "drops")
	}
	send(0) // cut by the kernel; its later datagrams turn GRO on
	drain(0, 0)
	require.True(t, soft.GROActive(b.qp)[0], "UDP_GRO on the multicast socket once a run came")
	send(1)
	drain(1, batch)
	reads, dgrams := soft.GROReads(b.qp)
	require.Equal(t, [2]uint64{1, batch}, [2]uint64{reads, dgrams}, "one coalesced read of the run")
}
