//go:build linux

package soft_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/roce"
	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/internal/verbs/soft"
)

// TestReadWrapsReceiveRing: a read of several datagrams whose posted
// receives run past the end of the receive ring and on from its start
// puts each datagram in the buffer of its own receive, in posting order.
// The ring holds 4 receives and its head is at its last entry, so a read
// of 4 wraps after the first.
func TestReadWrapsReceiveRing(t *testing.T) {
	const depth = 4
	a := newEndpoint(t, verbs.QPConfig{RecvDepth: depth})
	s := newEndpoint(t, verbs.QPConfig{SendDepth: 64})
	ah, err := s.qp.CreateAH(verbs.AHAttr{DGID: a.id.Local().GID, IsGlobal: true, HopLimit: 64})
	require.NoError(t, err)
	send := func(tag string, n int) {
		t.Helper()
		wrs := make([]verbs.SendWR, n)
		for i := range wrs {
			copy(s.sendBuf(i), fmt.Sprintf("%s %d", tag, i))
			wrs[i] = verbs.SendWR{WRID: uint64(i), SGE: s.sendSGE(i, len(tag)+2), AH: ah, RemoteQPN: a.qp.QPN(), RemoteQKey: a.qp.QKey()}
		}
		k, err := s.qp.PostSend(wrs)
		require.NoError(t, err)
		require.Equal(t, n, k)
	}
	// want checks that wcs are the n datagrams of tag, in order, each in
	// the buffer of the receives posted from first on.
	want := func(wcs []verbs.WC, tag string, first int) {
		t.Helper()
		for i, wc := range wcs {
			require.Equal(t, verbs.WCSuccess, wc.Status, "%s: completion %d", tag, i)
			require.Equal(t, uint64(first+i), wc.WRID, "%s: completion %d's receive", tag, i)
			require.Equal(t, fmt.Sprintf("%s %d", tag, i), string(a.buf(wc)[verbs.GRHSize:]), "%s: completion %d's buffer", tag, i)
		}
	}

	// Three of four receives used: the head is at the ring's last entry.
	a.postRecvs(0, depth)
	send("head", 3)
	got := a.recv(3, 2*time.Second)
	require.Len(t, got, 3)
	want(got, "head", 0)
	next := depth
	a.postRecvs(next, 3)
	next += 3

	// Four datagrams, read from the last entry round to the third: one
	// read takes all four when they are queued before it. Loopback
	// delivers a datagram in its sender's send unless softirqs are
	// deferred (a loaded machine): then the four may straddle the read,
	// which then does not wrap; try again (each try ends with the head
	// where it began).
	wcs := make([]verbs.WC, depth)
	first := 3
	for try := 0; ; try++ {
		tag := fmt.Sprintf("try%d", try)
		send(tag, depth)
		waitUnread(t, a)
		n, err := a.qp.RecvCQ().Poll(wcs)
		require.NoError(t, err)
		got := append([]verbs.WC(nil), wcs[:n]...)
		got = append(got, a.recv(depth-n, 2*time.Second)...)
		require.Len(t, got, depth, "%s: %d of the 4 received (one read took %d); drops %+v", tag, len(got), n, a.qp.Drops())
		want(got, tag, first)
		require.Zero(t, dropTotal(a.drops()), "%s: drops", tag)
		if n == depth {
			break // one read of 4 from the ring's last entry
		}
		if try == 7 {
			t.Skipf("the 4 datagrams never arrived before one read (%d read)", n)
		}
		first = next
		a.postRecvs(next, depth)
		next += depth
	}
}

// A bare read into buffers with room for the largest datagram (in place:
// a GRHAddressesOnly QP's unicast socket) takes every queued datagram a
// posted receive can hold, in one Poll, as a read with control messages
// does: two here, from one run. (A lone in-place bare read is recvfrom's;
// a read of more is recvmmsg's.) The run is cut as it arrives, so both
// are queued once one is; should a loaded machine split them across the
// Poll all the same, try again. A one-slot read into a shorter buffer
// after it is scattered, not taken for in place by the second slot's
// layout.
func TestBareInPlaceReadTakesAllQueued(t *testing.T) {
	const tries = 4
	b := newEndpoint(t, verbs.QPConfig{GRHAddressesOnly: true})
	s := newEndpoint(t, verbs.QPConfig{})
	ah, err := s.qp.CreateAH(verbs.AHAttr{DGID: b.id.Local().GID, IsGlobal: true, HopLimit: 64})
	require.NoError(t, err)
	size := verbs.GRHSize + b.id.Local().MTU + roce.ImmDtSize + 3 + roce.ICRCSize
	slot := uint32(2 * bufSize) // a buffer each, past the first's end
	require.GreaterOrEqual(t, int(slot), size)
	wrs := make([]verbs.SendWR, 2)
	wcs := make([]verbs.WC, 4)
	var reads []int
	for try := range tries {
		_, err := b.qp.PostRecv([]verbs.RecvWR{
			{WRID: 0, SGE: verbs.SGE{Offset: 0, Length: uint32(size), LKey: b.mr.LKey()}},
			{WRID: 1, SGE: verbs.SGE{Offset: slot, Length: uint32(size), LKey: b.mr.LKey()}},
		})
		require.NoError(t, err)
		for i := range wrs {
			msg := fmt.Sprintf("try%d %d", try, i)
			copy(s.sendBuf(i), msg)
			wrs[i] = verbs.SendWR{WRID: uint64(i), SGE: s.sendSGE(i, len(msg)), AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: b.qp.QKey()}
		}
		k, err := s.qp.PostSend(wrs)
		require.NoError(t, err)
		require.Equal(t, len(wrs), k)
		waitUnread(t, b)
		bare := soft.BareReads(b.qp)
		n, err := b.qp.RecvCQ().Poll(wcs)
		require.NoError(t, err)
		require.Greater(t, soft.BareReads(b.qp), bare, "try %d: the read was not bare", try)
		got := append([]verbs.WC(nil), wcs[:n]...)
		got = append(got, b.recv(len(wrs)-n, 2*time.Second)...)
		require.Len(t, got, len(wrs), "try %d: drops %+v", try, b.qp.Drops())
		for i, wc := range got {
			require.Equal(t, verbs.WCSuccess, wc.Status)
			require.Equal(t, uint64(i), wc.WRID, "try %d: completion %d's receive", try, i)
			require.Equal(t, fmt.Sprintf("try%d %d", try, i), string(b.arena.Slice(uint32(i)*slot, wc.ByteLen)[verbs.GRHSize:]))
		}
		if n == len(wrs) {
			break
		}
		reads = append(reads, n)
		require.Less(t, try, tries-1, "no Poll of %d tries read both datagrams queued for it: it read %v", tries, reads)
	}

	// A read of one slot then, into a buffer too short for in place,
	// is scattered (and recvmsg's) whatever the slot after it was.
	b.postRecvs(4, 1)
	s.send(ah, b.qp.QPN(), []byte("scattered"), 0, 0)
	got := b.recv(1, 2*time.Second)
	require.Len(t, got, 1, "drops %+v", b.qp.Drops())
	require.Equal(t, "scattered", string(b.buf(got[0])[verbs.GRHSize:]))
}

// TestRecvScratchGrowsWithStream: the receive scratch starts small, and a
// read that fills it (a stream) doubles it from the next Poll on, up to
// the queue depth here (recvBatch is 64 too); a Poll whose reads fall
// short of it leaves it. Each try sends as many datagrams as the scratch
// holds in one PostSend and Polls once they are there: the Poll took them
// all only if its first read did (a short read ends it), and then the
// next Poll must find the scratch doubled. On a loaded machine the first
// read may find some still on their way: the scratch must stay, and the
// size is tried again.
func TestRecvScratchGrowsWithStream(t *testing.T) {
	const depth, tries = nBufs, 40
	b := newEndpoint(t, verbs.QPConfig{RecvDepth: depth})
	s := newEndpoint(t, verbs.QPConfig{SendDepth: depth})
	b.postRecvs(0, depth)
	wcs := make([]verbs.WC, depth)
	size := soft.RecvScratch(b.qp)
	require.Less(t, size, depth, "the scratch starts at the queue depth")
	var sizes []int
	for try := 0; ; try++ {
		require.Less(t, try, tries, "the scratch never grew to %d slots: %v", depth, sizes)
		sizes = append(sizes, size)
		s.runTo(b, size, 64)
		waitUnread(t, b)
		n, err := b.qp.RecvCQ().Poll(wcs)
		require.NoError(t, err)
		got := append([]verbs.WC(nil), wcs[:n]...)
		deadline := time.Now().Add(5 * time.Second)
		for len(got) < size {
			require.True(t, time.Now().Before(deadline), "%d of %d datagrams arrived; drops %+v", len(got), size, b.qp.Drops())
			k, err := b.qp.RecvCQ().Poll(wcs)
			require.NoError(t, err)
			got = append(got, wcs[:k]...)
			if k == 0 {
				time.Sleep(time.Millisecond)
			}
		}
		require.Len(t, got, size)
		for _, wc := range got {
			require.Equal(t, verbs.WCSuccess, wc.Status)
			require.Equal(t, uint32(verbs.GRHSize+64), wc.ByteLen)
			b.postRecvs(int(wc.WRID), 1)
		}
		// The next Poll (nothing is queued) sizes the scratch for its reads.
		k, err := b.qp.RecvCQ().Poll(wcs)
		require.NoError(t, err)
		require.Zero(t, k)
		next := soft.RecvScratch(b.qp)
		if n < size {
			require.Equal(t, size, next, "try %d: the scratch changed after a Poll that read %d of %d", try, n, size)
			continue
		}
		require.Equal(t, min(2*size, depth), next, "try %d: a read filled the scratch of %d", try, size)
		if size == depth {
			return
		}
		size = next
	}
}

// TestRecvScratchKeptAtItsMost: a read that fills a scratch already at
// its most (the queue depth, 4 here) leaves that scratch as it is: the
// next Poll makes no new one, which would cost an allocation of every
// slot each time a stream fills it.
func TestRecvScratchKeptAtItsMost(t *testing.T) {
	const depth, tries = 4, 40
	b := newEndpoint(t, verbs.QPConfig{RecvDepth: depth})
	s := newEndpoint(t, verbs.QPConfig{SendDepth: depth})
	b.postRecvs(0, depth)
	require.Equal(t, depth, soft.RecvScratch(b.qp), "the scratch starts at the queue depth, under firstScratch")
	at := soft.RecvScratchAt(b.qp)
	wcs := make([]verbs.WC, depth)
	for try := 0; ; try++ {
		require.Less(t, try, tries, "no read took %d datagrams at once", depth)
		s.runTo(b, depth, 64)
		waitUnread(t, b)
		n, err := b.qp.RecvCQ().Poll(wcs)
		require.NoError(t, err)
		got := n
		deadline := time.Now().Add(5 * time.Second)
		for k := n; got < depth; got += k {
			require.True(t, time.Now().Before(deadline), "%d of %d datagrams arrived; drops %+v", got, depth, b.qp.Drops())
			if k == 0 {
				waitUnread(t, b)
			}
			k, err = b.qp.RecvCQ().Poll(wcs[got:])
			require.NoError(t, err)
		}
		b.postRecvs(0, depth)
		// The next Poll (nothing is queued) would grow a scratch the
		// read filled.
		k, err := b.qp.RecvCQ().Poll(wcs)
		require.NoError(t, err)
		require.Zero(t, k)
		require.Equal(t, depth, soft.RecvScratch(b.qp), "try %d: the scratch at its most changed size", try)
		require.Equal(t, at, soft.RecvScratchAt(b.qp), "try %d: the scratch at its most was made again", try)
		if n == depth {
			return
		}
	}
}

// A scattered read (a buffer too short for the largest datagram: header
// scratch, buffer, tail scratch) gives the kernel those three iovecs
// only. Slot 0's fourth iovec still points where an earlier read in place
// left it, at a buffer already completed and the caller's again: a
// datagram too long for the scattered buffer is cut and dropped, and
// that buffer stays untouched.
func TestScatteredReadAfterInPlaceKeepsOut(t *testing.T) {
	b := newEndpoint(t, verbs.QPConfig{})
	r := newRawSender(t)
	mtu := b.id.Local().MTU
	uni := b.qp.UnicastIP()
	h := roce.Header{Opcode: roce.OpUDSendOnly, PKey: 0xFFFF, DestQPN: b.qp.QPN(), QKey: b.qp.QKey(), SrcQPN: 0x4242}
	post := func(wrid uint64, size int) {
		t.Helper()
		sge := verbs.SGE{Offset: uint32(int(wrid) * bufSize), Length: uint32(size), LKey: b.mr.LKey()}
		n, err := b.qp.PostRecv([]verbs.RecvWR{{WRID: wrid, SGE: sge}})
		require.NoError(t, err)
		require.Equal(t, 1, n)
	}
	// Read in place into buffer 0: slot 0's in-place iovec points there.
	post(0, verbs.GRHSize+mtu+4+3+4)
	r.send(t, r.datagram(h, []byte("in place"), uni), uni)
	wcs := b.recv(1, 5*time.Second)
	require.Len(t, wcs, 1, "the datagram read in place")
	require.Equal(t, uint64(0), wcs[0].WRID)
	done := b.arena.Slice(0, uint32(bufSize))
	for i := range done {
		done[i] = 0xA5
	}
	// Buffer 2 is read scattered: a datagram 40 bytes over the MTU runs
	// 28 bytes past its tail scratch.
	post(2, verbs.GRHSize+mtu)
	before := b.qp.Drops().TooLong
	r.send(t, r.datagram(h, make([]byte, mtu+40), uni), uni)
	r.send(t, r.datagram(h, []byte("fits"), uni), uni)
	wcs = b.recv(1, 5*time.Second)
	require.Len(t, wcs, 1, "the datagram after the one too long")
	require.Equal(t, uint64(2), wcs[0].WRID)
	require.Equal(t, "fits", string(b.buf(wcs[0])[verbs.GRHSize:]))
	require.Equal(t, before+1, b.qp.Drops().TooLong, "TooLong drops")
	requireGuard(t, done, 0)
}

// A one-slot bare read of a datagram in place goes by recvfrom, the
// kernel's cheapest receive (recv's comment; the package doc's
// "recvfrom on a socket without GRO, for one datagram"): the unicast
// reads of a GRHAddressesOnly QP are bare, its one receive has room for
// the largest datagram, and a Poll of one completion reads one. A QP
// that reads control messages reads the same datagram by recvmsg.
func TestOneSlotBareReadByRecvfrom(t *testing.T) {
	for _, c := range []struct {
		addrOnly bool
		want     int // reads by recvfrom
	}{{true, 1}, {false, 0}} {
		t.Run(fmt.Sprintf("GRHAddressesOnly=%v", c.addrOnly), func(t *testing.T) {
			s := newEndpoint(t, verbs.QPConfig{})
			b := newEndpoint(t, verbs.QPConfig{GRHAddressesOnly: c.addrOnly})
			sge := b.recvSGE(0)
			sge.Length = 2 * bufSize                                     // GRH + MTU and more: in place
			k, err := b.qp.PostRecv([]verbs.RecvWR{{WRID: 0, SGE: sge}}) // b.buf: buffer 0
			require.NoError(t, err)
			require.Equal(t, 1, k)
			reads, restore := soft.CountRecvfrom(soft.UnicastFd(b.qp))
			defer restore()
			wc := sendOnePollOne(t, s, b)
			require.Equal(t, verbs.WCSuccess, wc.Status)
			require.Equal(t, uint64(0), wc.WRID)
			require.Equal(t, c.want, reads(), "reads of the unicast socket by recvfrom")
		})
	}
}

// A one-slot read that is not a bare one in place goes by recvmsg, which
// costs a little less than a one-slot recvmmsg (recvmsgOne's comment): a
// Poll of one completion on a QP that reads control messages, a
// datagram waiting on its unicast socket.
func TestOneSlotReadByRecvmsg(t *testing.T) {
	s := newEndpoint(t, verbs.QPConfig{})
	b := newEndpoint(t, verbs.QPConfig{})
	b.postRecvs(0, 4)
	reads, restore := soft.CountRecvmsg(soft.UnicastFd(b.qp))
	defer restore()
	sendOnePollOne(t, s, b)
	require.Equal(t, 1, reads(), "one-slot reads of the unicast socket by recvmsg")
}

// sendOnePollOne sends "one" from s to b's QPN, waits until it is unread
// at b, and Polls b's receive CQ for one completion: the datagram's.
func sendOnePollOne(t *testing.T, s, b *endpoint) verbs.WC {
	t.Helper()
	ah, err := s.qp.CreateAH(verbs.AHAttr{DGID: b.id.Local().GID, IsGlobal: true, HopLimit: 64})
	require.NoError(t, err)
	s.send(ah, b.qp.QPN(), []byte("one"), 0, 0)
	waitUnread(t, b)
	var wcs [1]verbs.WC
	n, err := b.qp.RecvCQ().Poll(wcs[:])
	require.NoError(t, err)
	require.Equal(t, 1, n, "completions of a Poll with the datagram waiting")
	require.Equal(t, []byte("one"), b.buf(wcs[0])[verbs.GRHSize:])
	return wcs[0]
}
