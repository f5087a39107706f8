//go:build linux

package soft_test

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/infiniband"
	"github.com/go-rdma/rdmanet/internal/testenv"
	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/internal/verbs/soft"
)

// WRs of a batch the kernel refuses complete with WCGeneralErr and the
// errno in WC.Errno, signaled or not, and none is lost: here twice as many
// error completions as the send CQ is deep. (Not parallel: RefuseGSO
// replaces the QPs' sendmmsg.)
func TestBatchSendErrorsCompleteWithTheirErrno(t *testing.T) {
	e := newEndpoint(t, verbs.QPConfig{SendDepth: 4})
	_, ah := e.join("239.202.9.1", true)
	refused, restore := soft.RefuseGSO(unix.EPERM)
	defer restore()
	wrs := make([]verbs.SendWR, 8)
	for i := range wrs {
		wrs[i] = verbs.SendWR{WRID: uint64(i), SGE: e.sendSGE(0, 100), AH: ah,
			RemoteQPN: verbs.MulticastQPN, RemoteQKey: e.qp.QKey()}
	}
	n, err := e.qp.PostSend(wrs)
	require.NoError(t, err)
	require.Equal(t, len(wrs), n, "a batch is posted; its errors complete")
	require.Equal(t, int32(2), refused.Load(), "two GSO runs of 4, both refused")

	wcs := make([]verbs.WC, 16)
	n, err = e.qp.SendCQ().Poll(wcs)
	require.NoError(t, err)
	require.Equal(t, len(wrs), n, "every error completion is kept, past the CQ's depth of 4")
	for i, wc := range wcs[:n] {
		assert.Equal(t, uint64(i), wc.WRID)
		assert.Equal(t, verbs.WCGeneralErr, wc.Status)
		assert.Equal(t, uint32(unix.EPERM), wc.Errno)
	}

	// Sends that go out complete successfully, with no errno.
	restore()
	wrs[0].Flags = verbs.SendSignaled
	n, err = e.qp.PostSend(wrs[:2])
	require.NoError(t, err)
	require.Equal(t, 2, n)
	n, err = e.qp.SendCQ().Poll(wcs)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the signaled one")
	assert.Equal(t, verbs.WCSuccess, wcs[0].Status)
	assert.Zero(t, wcs[0].Errno)
}

// A lone WR the kernel refuses is not queued: PostSend returns sendto's
// error with its errno and completes nothing. Here the route the AH was
// made with is taken away before the send: sendto fails with
// EHOSTUNREACH. An AH made after that fails itself: CreateAH asks for
// the route, as ibv_create_ah does. (In a namespace of its own: it
// changes routes.)
func TestLoneSendErrorReturnsErrno(t *testing.T) {
	if !testenv.InOwnNetns(t, "ip route add 10.255.0.0/16 dev lo") {
		return
	}
	e := newEndpoint(t, verbs.QPConfig{})
	ah := ahTo10_255_0_1(t, e)
	out, err := exec.Command("ip", "route", "add", "unreachable", "10.255.0.1/32").CombinedOutput()
	require.NoError(t, err, "ip route add unreachable: %s", out)
	loneSendFails(t, e, ah, 100, unix.EHOSTUNREACH)
	_, err = e.qp.CreateAH(ah.Attr())
	require.ErrorIs(t, err, unix.EHOSTUNREACH, "CreateAH with the route unreachable")
	// A lone WR refused before it is sent returns its own error, not the
	// last send's.
	mtu := e.id.Local().MTU
	n, err := e.qp.PostSend([]verbs.SendWR{{WRID: 6, SGE: e.sendSGE(0, mtu+1), AH: ah, RemoteQPN: 0x11, RemoteQKey: e.qp.QKey()}})
	require.ErrorIs(t, err, verbs.ErrMessageSize)
	require.Zero(t, n)
}

// ahTo10_255_0_1 is an AH of e's QP to ::ffff:10.255.0.1, which the
// lone-send tests route in a namespace of their own.
func ahTo10_255_0_1(t *testing.T, e *endpoint) verbs.AH {
	t.Helper()
	gid, err := infiniband.ParseGID("::ffff:10.255.0.1")
	require.NoError(t, err)
	ah, err := e.qp.CreateAH(verbs.AHAttr{DGID: gid, IsGlobal: true, HopLimit: 64})
	require.NoError(t, err)
	return ah
}

// loneSendFails posts one signaled WR of size bytes to ah and wants
// PostSend to return sendto's want, with nothing posted and nothing
// completed.
func loneSendFails(t *testing.T, e *endpoint, ah verbs.AH, size int, want unix.Errno) {
	t.Helper()
	wr := verbs.SendWR{WRID: 5, SGE: e.sendSGE(0, size), AH: ah, RemoteQPN: 0x11,
		RemoteQKey: e.qp.QKey(), Flags: verbs.SendSignaled}
	n, err := e.qp.PostSend([]verbs.SendWR{wr})
	require.ErrorIs(t, err, want, "got %v, want sendto's %v", err, want)
	require.Zero(t, n, "got %d posted, want 0", n)
	wcs := make([]verbs.WC, 8)
	n, err = e.qp.SendCQ().Poll(wcs)
	require.NoError(t, err)
	require.Zero(t, n, "got %d completions, want none for a WR not posted", n)
}

// A lone WR too big for its route's MTU (DF is set: EMSGSIZE) fails
// alone: PostSend returns sendto's error and completes nothing, and the
// QP still sends runs as GSO. Only a run the route refuses is sent again
// one datagram at a time (and ends the QP's runs); a lone datagram has
// nothing to cut. (In a namespace of its own: it adds a route.)
func TestLoneSendTooBigForRoute(t *testing.T) {
	if !testenv.InOwnNetns(t, "ip route add 10.255.0.0/16 dev lo mtu lock 576") {
		return
	}
	e := newEndpoint(t, verbs.QPConfig{SendDepth: 16})
	ah := ahTo10_255_0_1(t, e)
	loneSendFails(t, e, ah, 1000, unix.EMSGSIZE)

	// A run that fits the route goes as one GSO message.
	refused, restore := soft.RefuseGSO(unix.EPERM)
	defer restore()
	wrs := make([]verbs.SendWR, 4)
	for i := range wrs {
		wrs[i] = verbs.SendWR{WRID: uint64(i), SGE: e.sendSGE(i, 100), AH: ah, RemoteQPN: 0x11, RemoteQKey: e.qp.QKey()}
	}
	n, err := e.qp.PostSend(wrs)
	require.NoError(t, err)
	require.Equal(t, len(wrs), n)
	require.Equal(t, int32(1), refused.Load(), "the run after a lone EMSGSIZE was not sent as GSO")
}

// Error completions of unsignaled WRs may fill the send CQ past its
// depth; a signaled WR then finds no room, as at exactly the depth, and
// is refused (ErrQueueFull) until the completions are polled.
func TestSignaledRefusedWithCQPastDepth(t *testing.T) {
	e := newEndpoint(t, verbs.QPConfig{SendDepth: 4})
	_, ah := e.join("239.202.9.2", true)
	wr := func(i int, flags verbs.SendFlags) verbs.SendWR {
		return verbs.SendWR{WRID: uint64(i), SGE: e.sendSGE(0, 100), AH: ah, Flags: flags,
			RemoteQPN: verbs.MulticastQPN, RemoteQKey: e.qp.QKey()}
	}
	refused, restore := soft.RefuseGSO(unix.EPERM)
	wrs := make([]verbs.SendWR, 8)
	for i := range wrs {
		wrs[i] = wr(i, 0)
	}
	n, err := e.qp.PostSend(wrs)
	require.NoError(t, err)
	require.Equal(t, len(wrs), n)
	require.Equal(t, int32(2), refused.Load(), "two GSO runs of 4, both refused")
	restore()

	n, err = e.qp.PostSend([]verbs.SendWR{wr(8, verbs.SendSignaled)})
	require.ErrorIs(t, err, verbs.ErrQueueFull, "a signaled WR with 8 completions queued in a CQ of 4")
	require.Zero(t, n)
	wcs := make([]verbs.WC, 16)
	n, err = e.qp.SendCQ().Poll(wcs)
	require.NoError(t, err)
	require.Equal(t, len(wrs), n, "the error completions")
	n, err = e.qp.PostSend([]verbs.SendWR{wr(9, verbs.SendSignaled)})
	require.NoError(t, err, "a signaled WR once the CQ is polled")
	require.Equal(t, 1, n)
}
