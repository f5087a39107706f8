//go:build linux

package soft_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"os"
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

// TestGSORunsOnTheWire sends runs of datagrams through a TUN device and
// checks every IPv4 packet the kernel puts on it, headers and all. The
// kernel takes a run as one UDP GSO message and cuts it in software (the
// TUN has no UDP segmentation offload), giving segment j the IP ID j that
// its ICRC was sealed with. Where the kernel refuses GSO (EIO: older
// kernels on a device without checksum offload), the QP sends the run one
// datagram at a time, resealed for IP ID 0, and makes no more runs
// (Linux 6.1 does so without checksum offload; a hook makes any kernel).
// Either way every packet must carry a correct ICRC, in order, and every
// WR must complete successfully.
//
// It makes the TUN device in a network namespace of its own: the test
// re-executes itself under `unshare -n`, which needs root.
func TestGSORunsOnTheWire(t *testing.T) {
	if !testenv.IsNetnsChild(t) {
		if os.Geteuid() == 0 && !testenv.CanUnshare() {
			t.Skip("cannot make a private network namespace here (unshare -n)")
		}
		out := testenv.RunInOwnNetns(t)
		for _, sub := range []string{"gso", "no-checksum-offload", "gso-refused"} {
			assert.Contains(t, out, "--- PASS: TestGSORunsOnTheWire/"+sub)
		}
		return
	}

	tun := openTUN(t, "rdmatun0")
	for _, cmd := range [][]string{
		{"ip", "addr", "add", "10.77.0.1/24", "dev", "rdmatun0"},
		{"ip", "link", "set", "rdmatun0", "up"},
	} {
		out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput()
		require.NoError(t, err, "%v: %s", cmd, out)
	}

	t.Run("gso", func(t *testing.T) {
		require.NoError(t, unix.IoctlSetInt(tun, unix.TUNSETOFFLOAD, unix.TUN_F_CSUM))
		e := tunEndpoint(t)
		pkts := sendThroughTUN(t, e, tun)
		for j, p := range pkts {
			assert.Equal(t, uint16(j), binary.BigEndian.Uint16(p[4:]), "packet %d: IP ID is its index in the GSO run", j)
		}
	})
	t.Run("no-checksum-offload", func(t *testing.T) {
		// Some kernels refuse UDP GSO (EIO) on a device without
		// checksum offload (6.1, in the VM); others checksum in
		// software and cut the run anyway (6.18, on the CI host).
		require.NoError(t, unix.IoctlSetInt(tun, unix.TUNSETOFFLOAD, 0))
		e := tunEndpoint(t)
		pkts := sendThroughTUN(t, e, tun)
		cut := binary.BigEndian.Uint16(pkts[1][4:]) == 1
		t.Logf("the kernel cut the run itself: %v", cut)
		for j, p := range pkts {
			want := uint16(0)
			if cut {
				want = uint16(j)
			}
			assert.Equal(t, want, binary.BigEndian.Uint16(p[4:]), "packet %d: IP ID", j)
		}
	})
	t.Run("gso-refused", func(t *testing.T) {
		require.NoError(t, unix.IoctlSetInt(tun, unix.TUNSETOFFLOAD, unix.TUN_F_CSUM))
		refused, restore := soft.RefuseGSO(unix.EIO)
		defer restore()
		e := tunEndpoint(t)
		for range 2 {
			pkts := sendThroughTUN(t, e, tun)
			for j, p := range pkts {
				assert.Zero(t, binary.BigEndian.Uint16(p[4:]), "packet %d: sent alone, IP ID 0", j)
			}
		}
		assert.Equal(t, int32(1), refused.Load(), "after a refusal the QP makes no more runs")
	})
}

func openTUN(t *testing.T, name string) int {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(fd) })
	ifr, err := unix.NewIfreq(name)
	require.NoError(t, err)
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	require.NoError(t, unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr))
	return fd
}

// tunEndpoint is a software QP on rdmatun0.
func tunEndpoint(t *testing.T) *endpoint {
	ifi, err := net.InterfaceByName("rdmatun0")
	require.NoError(t, err)
	return newEndpointOn(t, verbs.BindConfig{Interface: ifi}, verbs.QPConfig{})
}

// sendThroughTUN sends 9 datagrams to a group through the TUN, 8 of 100
// bytes and a last of 37, in one PostSend, every third from the second
// solicited, and returns the 9 IPv4 packets read off the TUN after
// checking their ICRC, destination, payload, BTH SE bit and PSN (one more
// than the packet before's).
func sendThroughTUN(t *testing.T, e *endpoint, tun int) [][]byte {
	qp := e.qp
	m, ah := e.join("239.77.0.1", true)

	const n = 9
	wrs := make([]verbs.SendWR, n)
	var want [][]byte
	for i := range wrs {
		size := 100
		if i == n-1 {
			size = 37
		}
		b := e.sendBuf(i)[:size]
		for k := range b {
			b[k] = byte(i*7 + k)
		}
		want = append(want, bytes.Clone(b))
		wrs[i] = verbs.SendWR{WRID: uint64(i), SGE: e.sendSGE(i, size),
			AH: ah, RemoteQPN: m.RemoteQPN, RemoteQKey: qp.QKey(), Flags: verbs.SendSignaled}
		if i%3 == 1 {
			wrs[i].Flags |= verbs.SendSolicited
		}
	}
	k, err := qp.PostSend(wrs)
	require.NoError(t, err)
	require.Equal(t, n, k)
	wcs := make([]verbs.WC, 16)
	k, err = qp.SendCQ().Poll(wcs)
	require.NoError(t, err)
	require.Equal(t, n, k)
	for i, wc := range wcs[:k] {
		assert.Equal(t, verbs.WCSuccess, wc.Status, "WR %d", i)
	}

	var pkts [][]byte
	buf := make([]byte, 65536)
	deadline := time.Now().Add(5 * time.Second)
	for len(pkts) < n && time.Now().Before(deadline) {
		r, err := unix.Read(tun, buf)
		if err == unix.EAGAIN {
			time.Sleep(time.Millisecond)
			continue
		}
		require.NoError(t, err)
		pkt := buf[:r]
		// Skip what else the kernel sends on a fresh link (IPv6, IGMP).
		if r < 28 || pkt[0]>>4 != 4 || pkt[9] != unix.IPPROTO_UDP || binary.BigEndian.Uint16(pkt[22:]) != roce.UDPPort {
			continue
		}
		pkts = append(pkts, bytes.Clone(pkt))
	}
	require.Len(t, pkts, n, "RoCEv2 packets on the TUN")
	var psn uint32 // each packet's PSN is the one before's plus 1, mod 2^24
	for j, pkt := range pkts {
		assert.True(t, roce.VerifyICRC(pkt), "packet %d: ICRC over the header the kernel wrote", j)
		assert.Equal(t, uint16(0x4000), binary.BigEndian.Uint16(pkt[6:])&0x4000, "packet %d: DF", j)
		assert.Equal(t, []byte{239, 77, 0, 1}, pkt[16:20], "packet %d: destination", j)
		var h roce.Header
		payload, r := roce.Decode(pkt[28:], &h)
		require.Equal(t, roce.Accepted, r, "packet %d", j)
		assert.Equal(t, want[j], payload, "packet %d: payload, in order", j)
		assert.Equal(t, j%3 == 1, h.SE, "packet %d: BTH SE as its WR's SendSolicited", j)
		if j > 0 {
			assert.Equal(t, (psn+1)&0xFFFFFF, h.PSN, "packet %d: the PSN after %#x", j, psn)
		}
		psn = h.PSN
	}
	return pkts
}

// TestRunsMixedBatch sends batches that must be cut into runs in several
// places (64 segments, 64 KiB, a shorter datagram, another destination,
// zero-length datagrams, immediates) and checks that every datagram
// arrives whole and in order, its GRH carrying the IP ID of its place in
// its run. A post of more WRs than the send scratch's 64 goes out 64 at a
// time: each batch of one destination a whole run, no datagram left over
// to go alone.
func TestRunsMixedBatch(t *testing.T) {
	r := newEndpoint(t, verbs.QPConfig{})
	s := newEndpoint(t, verbs.QPConfig{})
	r.join("239.201.9.1", false)
	m, gah := s.join("239.201.9.1", true)
	uah, err := s.qp.CreateAH(verbs.AHAttr{DGID: r.id.Local().GID, IsGlobal: true, HopLimit: 64})
	require.NoError(t, err)

	type dg struct {
		size  int
		uni   bool
		imm   bool
		runID uint16 // the IP ID its run gives it
	}
	var a []dg // 66 of 100 B: a run of exactly 64 segments, then one of 2
	for i := range roce.MaxGSOSegs + 2 {
		a = append(a, dg{size: 100, runID: uint16(i % roce.MaxGSOSegs)})
	}
	var b []dg
	for i := range 20 { // 4096 B: 15 fit in 64 KiB, then 5
		b = append(b, dg{size: 4096, runID: uint16(i % 15)})
	}
	b = append(b,
		dg{size: 4000, runID: 5},                           // a shorter one is the run's last
		dg{size: 4000, runID: 0}, dg{size: 4000, runID: 1}, // so a new run starts
		dg{size: 4000, uni: true, runID: 0},            // another destination
		dg{size: 4000, uni: true, imm: true, runID: 0}, // longer (ImmDt): a new run
		dg{size: 100, runID: 0}, dg{size: 100, runID: 1},
		dg{size: 0, runID: 2}, // shorter: joins, ends the run
		dg{size: 0, runID: 0}, dg{size: 0, imm: true, runID: 0})
	for _, batch := range [][]dg{a, b} {
		r.postRecvs(0, len(batch)) // past nBufs: r's send buffers, unused
		wrs := make([]verbs.SendWR, len(batch))
		for i, d := range batch {
			sge := s.sendSGE(i%nBufs, d.size)
			sge.Offset += uint32(i/nBufs) * bufSize / 2 // past nBufs (100 B each): a send buffer's second half
			p := s.arena.Slice(sge.Offset, sge.Length)
			for k := range p {
				p[k] = byte(i + k)
			}
			wrs[i] = verbs.SendWR{WRID: uint64(i), SGE: sge, AH: gah, RemoteQPN: m.RemoteQPN, RemoteQKey: s.qp.QKey()}
			if d.uni {
				wrs[i].AH, wrs[i].RemoteQPN = uah, r.qp.QPN()
			}
			if d.imm {
				wrs[i].Flags |= verbs.SendWithImm
				wrs[i].Imm = uint32(i)
			}
		}
		n, err := s.qp.PostSend(wrs)
		require.NoError(t, err)
		require.Equal(t, len(wrs), n)
		wcs := r.recv(len(batch), 5*time.Second)
		require.Len(t, wcs, len(batch))
		// Unicast and multicast arrive on two sockets: match by size and
		// content rather than assume one order across both.
		seen := make([]bool, len(batch))
		for _, wc := range wcs {
			buf := r.buf(wc)
			body := buf[verbs.GRHSize:]
			i := -1
			for j, d := range batch {
				if !seen[j] && d.size == len(body) && (d.size == 0 || body[0] == byte(j)) && d.imm == (wc.Flags&verbs.WCWithImm != 0) && (!d.imm || wc.Imm == uint32(j)) {
					i = j
					break
				}
			}
			require.GreaterOrEqual(t, i, 0, "a datagram of %d bytes that was not sent", len(body))
			seen[i] = true
			for k := range body {
				require.Equal(t, byte(i+k), body[k], "datagram %d byte %d", i, k)
			}
			assert.Equal(t, batch[i].runID, binary.BigEndian.Uint16(buf[24:]), "datagram %d: IP ID", i)
		}
	}
	assert.Zero(t, r.qp.Drops().BadICRC)
}

// A batch whose last run is two datagrams sends them as a run, two
// datagrams, not one gathered copy of both: each arrives whole. (A lone
// last datagram goes out by itself from a gathered copy.)
func TestRunOfTwoLast(t *testing.T) {
	s, r, o, ahR, ahO := senderToTwo(t)
	wr := func(i int, to *endpoint, ah verbs.AH) verbs.SendWR {
		p := s.sendBuf(i)[:100]
		for k := range p {
			p[k] = byte(i*7 + k)
		}
		return verbs.SendWR{WRID: uint64(i), SGE: s.sendSGE(i, len(p)), AH: ah, RemoteQPN: to.qp.QPN(), RemoteQKey: to.qp.QKey()}
	}
	expect := func(e *endpoint, first int, idx ...int) {
		t.Helper()
		wcs := e.recv(len(idx), 2*time.Second)
		require.Len(t, wcs, len(idx), "datagrams (drops %+v)", e.qp.Drops())
		for j, wc := range wcs {
			require.Equal(t, uint64(first+j), wc.WRID)
			p := e.buf(wc)[verbs.GRHSize:]
			require.Len(t, p, 100)
			for k := range p {
				require.Equal(t, byte(idx[j]*7+k), p[k], "datagram %d byte %d", idx[j], k)
			}
		}
	}
	for _, wrs := range [][]verbs.SendWR{
		{wr(0, r, ahR), wr(1, r, ahR)},                // the batch one run of two
		{wr(2, o, ahO), wr(3, r, ahR), wr(4, r, ahR)}, // a lone one, then a run of two
	} {
		n, err := s.qp.PostSend(wrs)
		require.NoError(t, err)
		require.Equal(t, len(wrs), n)
	}
	expect(r, 0, 0, 1, 3, 4)
	expect(o, 0, 2)
	var wcs [8]verbs.WC
	n, err := s.qp.SendCQ().Poll(wcs[:])
	require.NoError(t, err)
	for _, wc := range wcs[:n] {
		require.Equal(t, verbs.WCSuccess, wc.Status, "WR %d", wc.WRID)
	}
}

// A run the kernel refuses as GSO is sent again one datagram at a time,
// a run of two as well as longer ones, up to one that fills the send
// scratch; when that sendmmsg sends fewer
// than asked, the rest go by the next calls (here the last alone, by
// sendto): every datagram arrives once, in order, and every WR completes.
// (Not parallel: the hook replaces the QPs' sendmmsg.)
func TestRefusedRunSentShort(t *testing.T) {
	restore := soft.RefuseGSOSendShort(unix.EIO)
	defer restore()
	for _, n := range []int{2, 4, 8} { // 8: the run fills the send scratch (8 slots at first)
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			r := newEndpoint(t, verbs.QPConfig{})
			s := newEndpoint(t, verbs.QPConfig{SendDepth: 16}) // a refusal ends a QP's runs: one each
			r.postRecvs(0, 8)
			ah, err := s.qp.CreateAH(verbs.AHAttr{DGID: r.id.Local().GID, IsGlobal: true, HopLimit: 64})
			require.NoError(t, err)
			wrs := make([]verbs.SendWR, n)
			for i := range wrs {
				b := s.sendBuf(i)[:100]
				for k := range b {
					b[k] = byte(i)
				}
				wrs[i] = verbs.SendWR{WRID: uint64(i), SGE: s.sendSGE(i, 100), AH: ah, RemoteQPN: r.qp.QPN(),
					RemoteQKey: r.qp.QKey(), Flags: verbs.SendSignaled}
			}
			k, err := s.qp.PostSend(wrs)
			require.NoError(t, err)
			require.Equal(t, n, k)
			wcs := make([]verbs.WC, 8)
			k, err = s.qp.SendCQ().Poll(wcs)
			require.NoError(t, err)
			require.Equal(t, n, k)
			for i, wc := range wcs[:k] {
				require.Equal(t, verbs.WCSuccess, wc.Status, "WR %d: errno %d", i, wc.Errno)
			}
			got := r.recv(n, 2*time.Second)
			require.Len(t, got, n)
			for i, wc := range got {
				require.Equal(t, bytes.Repeat([]byte{byte(i)}, 100), r.buf(wc)[verbs.GRHSize:], "datagram %d, in order", i)
			}
		})
	}
}

// A run of one datagram goes out as a plain datagram, without UDP_SEGMENT:
// a kernel refuses any UDP_SEGMENT send on a route that cannot take GSO
// (one through IPsec: EIO), a single segment included, and a batch of
// datagrams to different destinations makes no run. Here with such
// refusals (RefuseUDPSegment), a batch of one datagram to each of two QPs:
// both complete without error and arrive. (Not parallel: the hook is
// process-wide.)
func TestLoneRunsWithoutUDPSegment(t *testing.T) {
	s := newEndpoint(t, verbs.QPConfig{})
	rx := []*endpoint{newEndpoint(t, verbs.QPConfig{}), newEndpoint(t, verbs.QPConfig{})}
	wrs := make([]verbs.SendWR, len(rx))
	for i, r := range rx {
		r.postRecvs(0, 1)
		ah, err := s.qp.CreateAH(verbs.AHAttr{DGID: r.id.Local().GID, IsGlobal: true, HopLimit: 64})
		require.NoError(t, err)
		copy(s.sendBuf(i), fmt.Sprintf("to %d", i))
		wrs[i] = verbs.SendWR{WRID: uint64(i), SGE: s.sendSGE(i, 4), AH: ah, RemoteQPN: r.qp.QPN(), RemoteQKey: r.qp.QKey(), Flags: verbs.SendSignaled}
	}
	restore := soft.RefuseUDPSegment(unix.EIO)
	defer restore()
	k, err := s.qp.PostSend(wrs)
	require.NoError(t, err)
	require.Equal(t, len(wrs), k)
	wcs := make([]verbs.WC, len(wrs))
	n, err := s.qp.SendCQ().Poll(wcs)
	require.NoError(t, err)
	require.Equal(t, len(wrs), n)
	for i, wc := range wcs {
		require.Equal(t, verbs.WCSuccess, wc.Status, "WR %d: errno %v", i, wc.Errno)
	}
	for i, r := range rx {
		got := r.recv(1, 2*time.Second)
		require.Len(t, got, 1, "QP %d", i)
		assert.Equal(t, fmt.Sprintf("to %d", i), string(r.buf(got[0])[verbs.GRHSize:]))
	}
}

// TestLoneLastDatagramBySendto: a post's last datagram, when it is a run
// of one, goes by sendto from a gathered copy (sendFlat: cheaper than
// sendmmsg for one), and a batch of runs by one sendmmsg whatever its
// last run: a lone WR makes no sendmmsg, two lone WRs (two runs: two
// destinations) one of both. (TestRunOfTwoLast: a last run of two.)
func TestLoneLastDatagramBySendto(t *testing.T) {
	s, r, o, ahR, ahO := senderToTwo(t)
	wr := func(i int, to *endpoint, ah verbs.AH) verbs.SendWR {
		p := s.sendBuf(i)[:100]
		for k := range p {
			p[k] = byte(i)
		}
		return verbs.SendWR{WRID: uint64(i), SGE: s.sendSGE(i, len(p)), AH: ah, RemoteQPN: to.qp.QPN(), RemoteQKey: to.qp.QKey()}
	}
	calls, restore := soft.CountSendRuns()
	defer restore()
	for _, tc := range []struct {
		wrs  []verbs.SendWR
		want []int // messages of each sendmmsg
	}{
		{[]verbs.SendWR{wr(0, r, ahR)}, nil},
		{[]verbs.SendWR{wr(1, o, ahO), wr(2, r, ahR)}, []int{2}},
	} {
		before := len(calls())
		n, err := s.qp.PostSend(tc.wrs)
		require.NoError(t, err)
		require.Equal(t, len(tc.wrs), n)
		require.Equal(t, tc.want, calls()[before:], "sendmmsg calls (messages each) for WRs %d-%d", tc.wrs[0].WRID, tc.wrs[len(tc.wrs)-1].WRID)
	}
	for _, want := range []struct {
		e   *endpoint
		ids []byte
	}{{r, []byte{0, 2}}, {o, []byte{1}}} {
		wcs := want.e.recv(len(want.ids), 5*time.Second)
		require.Len(t, wcs, len(want.ids), "datagrams (drops %+v)", want.e.qp.Drops())
		for j, wc := range wcs {
			require.Equal(t, want.ids[j], want.e.buf(wc)[verbs.GRHSize], "datagram %d", j)
		}
	}
}

// senderToTwo is a sender s (16 sends deep) and two receivers, r and o,
// each with 8 receives posted, and s's AHs to them.
func senderToTwo(t *testing.T) (s, r, o *endpoint, ahR, ahO verbs.AH) {
	t.Helper()
	r = newEndpoint(t, verbs.QPConfig{})
	o = newEndpoint(t, verbs.QPConfig{})
	s = newEndpoint(t, verbs.QPConfig{SendDepth: 16})
	r.postRecvs(0, 8)
	o.postRecvs(0, 8)
	var err error
	ahR, err = s.qp.CreateAH(verbs.AHAttr{DGID: r.id.Local().GID, IsGlobal: true, HopLimit: 64})
	require.NoError(t, err)
	ahO, err = s.qp.CreateAH(verbs.AHAttr{DGID: o.id.Local().GID, IsGlobal: true, HopLimit: 64})
	require.NoError(t, err)
	return s, r, o, ahR, ahO
}
