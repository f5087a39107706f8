//go:build linux

package soft_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/internal/verbs/soft"
)

const (
	bufSize = verbs.GRHSize + 4096
	nBufs   = 64
)

// endpoint is an ID bound on lo (or as newEndpointOn says) with its QP
// and an arena: nBufs receive buffers of bufSize, then nBufs send buffers.
type endpoint struct {
	t     testing.TB
	id    verbs.ID
	qp    *soft.QP
	arena *verbs.Arena
	mr    verbs.MR
}

func newEndpoint(t testing.TB, cfg verbs.QPConfig) *endpoint {
	t.Helper()
	return newEndpointOn(t, verbs.BindConfig{}, cfg)
}

// newEndpointOn is newEndpoint bound as bind says.
func newEndpointOn(t testing.TB, bind verbs.BindConfig, cfg verbs.QPConfig) *endpoint {
	t.Helper()
	p, err := verbs.Lookup(verbs.Software)
	require.NoError(t, err)
	id, err := p.Bind(bind)
	require.NoError(t, err)
	qp, err := id.CreateQP(cfg)
	if err != nil {
		id.Close()
	}
	require.NoError(t, err)
	a, err := verbs.NewArena(2 * nBufs * bufSize)
	require.NoError(t, err)
	mr, err := qp.RegisterMemory(a)
	require.NoError(t, err)
	e := &endpoint{t: t, id: id, qp: qp.(*soft.QP), arena: a, mr: mr}
	t.Cleanup(func() {
		require.NoError(t, id.Close())
		require.NoError(t, a.Free())
	})
	return e
}

func (e *endpoint) recvSGE(i int) verbs.SGE {
	return verbs.SGE{Offset: uint32(i * bufSize), Length: bufSize, LKey: e.mr.LKey()}
}

func (e *endpoint) sendBuf(i int) []byte {
	return e.arena.Slice(uint32((nBufs+i)*bufSize), 4096)
}

func (e *endpoint) sendSGE(i, n int) verbs.SGE {
	return verbs.SGE{Offset: uint32((nBufs + i) * bufSize), Length: uint32(n), LKey: e.mr.LKey()}
}

// postRecvs posts receive buffers first..first+n-1 with WRID = index.
func (e *endpoint) postRecvs(first, n int) {
	e.t.Helper()
	wrs := make([]verbs.RecvWR, n)
	for i := range wrs {
		wrs[i] = verbs.RecvWR{WRID: uint64(first + i), SGE: e.recvSGE(first + i)}
	}
	k, err := e.qp.PostRecv(wrs)
	require.NoError(e.t, err)
	require.Equal(e.t, n, k)
}

func (e *endpoint) join(group string, sendOnly bool) (verbs.Membership, verbs.AH) {
	e.t.Helper()
	m, err := e.id.Join(context.Background(), verbs.Group{IP: net.ParseIP(group)}, verbs.JoinOptions{SendOnly: sendOnly})
	require.NoError(e.t, err)
	ah, err := e.qp.CreateAH(m.AH)
	require.NoError(e.t, err)
	return m, ah
}

// send sends payload (copied to send buffer 0) to ah/qpn, signaled, and
// checks its completion.
func (e *endpoint) send(ah verbs.AH, qpn uint32, payload []byte, flags verbs.SendFlags, imm uint32) {
	e.t.Helper()
	copy(e.sendBuf(0), payload)
	wr := verbs.SendWR{WRID: 77, SGE: e.sendSGE(0, len(payload)), AH: ah, RemoteQPN: qpn,
		RemoteQKey: e.qp.QKey(), Imm: imm, Flags: flags | verbs.SendSignaled}
	n, err := e.qp.PostSend([]verbs.SendWR{wr})
	require.NoError(e.t, err)
	require.Equal(e.t, 1, n)
	var wcs [4]verbs.WC
	n, err = e.qp.SendCQ().Poll(wcs[:])
	require.NoError(e.t, err)
	require.Equal(e.t, 1, n)
	require.Equal(e.t, verbs.WCSuccess, wcs[0].Status)
	require.Equal(e.t, uint64(77), wcs[0].WRID)
}

// recv polls until want completions arrived or timeout passed.
func (e *endpoint) recv(want int, timeout time.Duration) []verbs.WC {
	e.t.Helper()
	return e.recvBy(64, want, timeout)
}

// recvBy is recv with Polls of at most width completions.
func (e *endpoint) recvBy(width, want int, timeout time.Duration) []verbs.WC {
	e.t.Helper()
	var got []verbs.WC
	wcs := make([]verbs.WC, width)
	deadline := time.Now().Add(timeout)
	for len(got) < want && time.Now().Before(deadline) {
		n, err := e.qp.RecvCQ().Poll(wcs)
		require.NoError(e.t, err)
		got = append(got, wcs[:n]...)
		if n == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	return got
}

// unicastTo sends payload from e to b's QP as a UD unicast datagram and
// returns b's one completion for it (b has a receive posted).
func (e *endpoint) unicastTo(b *endpoint, payload []byte) verbs.WC {
	e.t.Helper()
	ah, err := e.qp.CreateAH(verbs.AHAttr{DGID: b.id.Local().GID, IsGlobal: true, HopLimit: 64})
	require.NoError(e.t, err)
	e.send(ah, b.qp.QPN(), payload, 0, 0)
	wcs := b.recv(1, 2*time.Second)
	require.Len(e.t, wcs, 1)
	return wcs[0]
}

// runTo sends n unicast datagrams of size bytes from e to b in one
// PostSend, a run that the kernel may coalesce (UDP GSO and GRO), and
// checks that all were posted.
func (e *endpoint) runTo(b *endpoint, n, size int) {
	e.t.Helper()
	ah, err := e.qp.CreateAH(verbs.AHAttr{DGID: b.id.Local().GID, IsGlobal: true, HopLimit: 64})
	require.NoError(e.t, err)
	wrs := make([]verbs.SendWR, n)
	for i := range wrs {
		wrs[i] = verbs.SendWR{WRID: uint64(i), SGE: e.sendSGE(i, size), AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: b.qp.QKey()}
	}
	k, err := e.qp.PostSend(wrs)
	require.NoError(e.t, err)
	require.Equal(e.t, n, k, "datagrams of the run posted")
}

// requireGuard checks that nothing past the first size bytes of region,
// poisoned with 0xA5 before the receive, was written.
func requireGuard(t *testing.T, region []byte, size int) {
	t.Helper()
	for i := size; i < len(region); i++ {
		require.Equal(t, byte(0xA5), region[i], "byte %d past the posted buffer written", i)
	}
}

// buf returns the receive buffer a receive completion used.
func (e *endpoint) buf(wc verbs.WC) []byte {
	return e.arena.Slice(uint32(int(wc.WRID)*bufSize), wc.ByteLen)
}

// drops is the QP's drops less NotForUs, for the tests that count the
// drops they cause and cause none of that reason. A QP's multicast
// socket is bound to *:4791, so it also gets the datagrams other tests
// (other packages' too, run beside these) send to QPs that have closed
// since, each counted NotForUs.
func (e *endpoint) drops() soft.Drops {
	d := e.qp.Drops()
	d.NotForUs = 0
	return d
}
