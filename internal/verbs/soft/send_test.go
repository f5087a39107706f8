//go:build linux

package soft_test

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/internal/verbs/soft"
)

// A batch's last WR, left alone after the kernel refused the run before
// it, goes out with sendto from a gathered copy: a payload of one byte is
// gathered too, not left as the copy held it from an earlier send. (Not
// parallel: RefuseGSO is process-wide.)
func TestBatchLastOneBytePayload(t *testing.T) {
	e := newEndpoint(t, verbs.QPConfig{})
	b := newEndpoint(t, verbs.QPConfig{})
	c := newEndpoint(t, verbs.QPConfig{})
	c.postRecvs(0, 4)
	// A lone send leaves its payload ('x') in the copy.
	wc := e.unicastTo(c, []byte("x"))
	require.Equal(t, verbs.WCSuccess, wc.Status)
	require.Equal(t, byte('x'), c.arena.Bytes()[c.recvSGE(int(wc.WRID)).Offset+verbs.GRHSize])

	ahB, err := e.qp.CreateAH(verbs.AHAttr{DGID: b.id.Local().GID, IsGlobal: true, HopLimit: 64})
	require.NoError(t, err)
	ahC, err := e.qp.CreateAH(verbs.AHAttr{DGID: c.id.Local().GID, IsGlobal: true, HopLimit: 64})
	require.NoError(t, err)
	e.sendBuf(2)[0] = 'y'
	wrs := []verbs.SendWR{ // a run of two to b, then one byte to c
		{WRID: 1, SGE: e.sendSGE(0, 100), AH: ahB, RemoteQPN: b.qp.QPN(), RemoteQKey: b.qp.QKey()},
		{WRID: 2, SGE: e.sendSGE(1, 100), AH: ahB, RemoteQPN: b.qp.QPN(), RemoteQKey: b.qp.QKey()},
		{WRID: 3, SGE: e.sendSGE(2, 1), AH: ahC, RemoteQPN: c.qp.QPN(), RemoteQKey: c.qp.QKey(), Flags: verbs.SendSignaled},
	}
	refused, restore := soft.RefuseGSO(unix.EPERM)
	n, err := e.qp.PostSend(wrs)
	restore()
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.Equal(t, int32(1), refused.Load(), "the run to b refused")

	var got [4]verbs.WC
	k, err := e.qp.SendCQ().Poll(got[:])
	require.NoError(t, err)
	require.Equal(t, 3, k, "the run's two error completions and WR 3's: %+v", got[:k])
	require.Equal(t, verbs.WCGeneralErr, got[0].Status)
	require.Equal(t, verbs.WCSuccess, got[2].Status)

	wcs := c.recv(1, 2*time.Second)
	require.Len(t, wcs, 1, "c's datagram of 1 byte (dropped: %+v)", c.qp.Drops())
	require.Equal(t, uint32(verbs.GRHSize+1), wcs[0].ByteLen)
	require.Equal(t, byte('y'), c.arena.Bytes()[c.recvSGE(int(wcs[0].WRID)).Offset+verbs.GRHSize])
}

// A send carries its work request's Q_Key, not the sender's own, unless
// the request's has the high bit set: then the QP's own, as verbs does.
// The other Q_Key has its low bit set too: only the high bit counts.
func TestSendQKey(t *testing.T) {
	const otherQKey = 0x0BADF00D
	e := newEndpoint(t, verbs.QPConfig{})
	b := newEndpoint(t, verbs.QPConfig{QKey: otherQKey})
	c := newEndpoint(t, verbs.QPConfig{})
	require.Equal(t, uint32(otherQKey), b.qp.QKey())
	require.Equal(t, e.qp.QKey(), c.qp.QKey())
	b.postRecvs(0, 4)
	c.postRecvs(0, 4)
	ah := func(to *endpoint) verbs.AH {
		ah, err := e.qp.CreateAH(verbs.AHAttr{DGID: to.id.Local().GID, IsGlobal: true, HopLimit: 64})
		require.NoError(t, err)
		return ah
	}
	send := func(to *endpoint, qkey uint32, payload string) {
		t.Helper()
		copy(e.sendBuf(0), payload)
		wr := verbs.SendWR{WRID: 7, SGE: e.sendSGE(0, len(payload)), AH: ah(to), RemoteQPN: to.qp.QPN(),
			RemoteQKey: qkey, Flags: verbs.SendSignaled}
		n, err := e.qp.PostSend([]verbs.SendWR{wr})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		var wcs [1]verbs.WC
		n, err = e.qp.SendCQ().Poll(wcs[:])
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, verbs.WCSuccess, wcs[0].Status)
	}
	expect := func(to *endpoint, payload string) {
		t.Helper()
		wcs := to.recv(1, 2*time.Second)
		require.Len(t, wcs, 1, "%q (drops %+v)", payload, to.qp.Drops())
		require.Equal(t, payload, string(to.buf(wcs[0])[verbs.GRHSize:]))
	}

	send(b, e.qp.QKey(), "the sender's Q_Key")
	send(b, otherQKey, "b's Q_Key")
	expect(b, "b's Q_Key") // in order: the first was dropped
	require.Equal(t, soft.Drops{BadQKey: 1}, b.drops())

	send(c, 0x80000000|otherQKey, "high bit: the sender's own Q_Key")
	expect(c, "high bit: the sender's own Q_Key")
	require.Equal(t, soft.Drops{}, c.drops())
}

// PostSend keeps no inline buffer of the caller's once it returns: a
// batch's slots point at the buffers while the datagrams are sent (no
// copy), and are cleared after, so a buffer the caller drops is
// collected. (A lone WR's payload is copied into the QP's own buffer.)
func TestInlineBuffersNotKept(t *testing.T) {
	a := newEndpoint(t, verbs.QPConfig{})
	b := newEndpoint(t, verbs.QPConfig{})
	ah, err := a.qp.CreateAH(verbs.AHAttr{DGID: b.id.Local().GID, IsGlobal: true, HopLimit: 64})
	require.NoError(t, err)
	const n = 4
	var freed atomic.Int32
	func() {
		wrs := make([]verbs.SendWR, n)
		for i := range wrs {
			buf := new([64]byte)
			runtime.AddCleanup(buf, func(*atomic.Int32) { freed.Add(1) }, &freed)
			wrs[i] = verbs.SendWR{WRID: uint64(i), Inline: buf[:], SGE: verbs.SGE{Length: uint32(len(buf))},
				AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: b.qp.QKey(), Flags: verbs.SendInline}
		}
		k, err := a.qp.PostSend(wrs)
		require.NoError(t, err)
		require.Equal(t, n, k)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for freed.Load() < n && time.Now().Before(deadline) {
		runtime.GC() // each GC queues the cleanups of what it found unreachable
		runtime.Gosched()
	}
	require.Equal(t, int32(n), freed.Load(), "inline buffers collected after PostSend returned")
}

// A lone WR's payload is copied into the QP's flat buffer by the pass
// that seals its ICRC (the package doc's "its payload copied by the pass
// that computes its ICRC"), so sendFlat's sendto needs no copy of its
// own; the payloads of a batch stay where they are, for sendmmsg to
// gather.
func TestLonePayloadSealedIntoFlat(t *testing.T) {
	s := newEndpoint(t, verbs.QPConfig{SendDepth: 64})
	b := newEndpoint(t, verbs.QPConfig{})
	ah, err := s.qp.CreateAH(verbs.AHAttr{DGID: b.id.Local().GID, IsGlobal: true, HopLimit: 64})
	require.NoError(t, err)
	wr := func(i int) verbs.SendWR {
		copy(s.sendBuf(i), "payload")
		return verbs.SendWR{WRID: uint64(i), SGE: s.sendSGE(i, 7), AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: b.qp.QKey()}
	}
	in, err := soft.PreparedInFlat(s.qp, []verbs.SendWR{wr(0)})
	require.NoError(t, err)
	require.Equal(t, []bool{true}, in, "a lone WR's payload in the flat buffer")
	in, err = soft.PreparedInFlat(s.qp, []verbs.SendWR{wr(0), wr(1)})
	require.NoError(t, err)
	require.Equal(t, []bool{false, false}, in, "a batch's payloads in the flat buffer")
}

// TestSendScratchGrowsOnlyPastItself: the send scratch starts at 8 slots
// (firstScratch) and is made again only for a batch bigger than it, at
// twice its size or the batch's, up to the queue depth (32 here): a batch
// of its size leaves it as it is, and so does a bigger batch once it is
// at its most (a post that made it again would allocate every slot).
func TestSendScratchGrowsOnlyPastItself(t *testing.T) {
	const depth = 32
	s := newEndpoint(t, verbs.QPConfig{SendDepth: depth})
	b := newEndpoint(t, verbs.QPConfig{})
	n, at := soft.SendScratch(s.qp)
	require.Equal(t, 8, n, "the first send scratch")
	s.runTo(b, 8, 64)
	n, now := soft.SendScratch(s.qp)
	require.Equal(t, [2]any{8, at}, [2]any{n, now}, "a batch of the scratch's size made it again")
	s.runTo(b, 9, 64)
	n, _ = soft.SendScratch(s.qp)
	require.Equal(t, 16, n, "a batch of 9 grows the scratch of 8 to twice that")
	s.runTo(b, 17, 64)
	n, at = soft.SendScratch(s.qp)
	require.Equal(t, depth, n, "a batch of 17 grows the scratch of 16 to the depth")
	s.runTo(b, depth+4, 64)
	n, now = soft.SendScratch(s.qp)
	require.Equal(t, [2]any{depth, at}, [2]any{n, now}, "a batch past the scratch at its most made it again")
}
