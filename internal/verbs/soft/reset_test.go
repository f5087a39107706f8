//go:build linux

package soft_test

import (
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/testenv"
	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/internal/verbs/soft"
)

// TestResetInPlace: a QP put in the error state (QP_FATAL) flushes its
// sends and is not Ready; Reset brings it back with the same QPN and
// groups, its receive queue emptied (what was posted before is the
// caller's again), and it sends and receives as before.
func TestResetInPlace(t *testing.T) {
	rx := newEndpoint(t, verbs.QPConfig{})
	tx := newEndpoint(t, verbs.QPConfig{})
	const group = "239.80.2.1"
	m, rxAH := rx.join(group, false)
	_, ah := tx.join(group, true)
	qpn := rx.qp.QPN()
	rx.postRecvs(0, 4)

	ready, err := rx.qp.Ready()
	require.NoError(t, err)
	require.True(t, ready, "a new QP is in RTS")
	require.NoError(t, soft.InjectEvent(rx.id, verbs.Event{Type: verbs.EventQPError}))
	ready, err = rx.qp.Ready()
	require.NoError(t, err)
	require.False(t, ready, "after QP_FATAL the QP is in the error state")

	// In the error state a send is flushed: it completes with
	// WCWRFlushErr, no errno, and nothing leaves.
	peer := newEndpoint(t, verbs.QPConfig{})
	peer.join(group, false)
	peer.postRecvs(0, 1)
	copy(rx.sendBuf(0), "flushed")
	n, err := rx.qp.PostSend([]verbs.SendWR{{WRID: 9, SGE: rx.sendSGE(0, 7), AH: rxAH, RemoteQPN: m.RemoteQPN, RemoteQKey: m.QKey}})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	var wcs [4]verbs.WC
	n, err = rx.qp.SendCQ().Poll(wcs[:])
	require.NoError(t, err)
	require.Equal(t, 1, n, "an unsignaled WR flushed completes too")
	assert.Equal(t, verbs.WCWRFlushErr, wcs[0].Status)
	assert.Zero(t, wcs[0].Errno)
	assert.Empty(t, peer.recv(1, 100*time.Millisecond), "a flushed send left the QP")

	// Reset joins the groups again: here one whose membership the
	// kernel dropped meanwhile (as when a netdev goes away).
	require.NoError(t, soft.DropMemberships(rx.qp))
	require.NoError(t, rx.qp.Reset())
	ready, err = rx.qp.Ready()
	require.NoError(t, err)
	require.True(t, ready, "Reset brings the QP back to RTS")
	require.Equal(t, qpn, rx.qp.QPN(), "the QPN is kept")

	// The receive queue was emptied: a datagram waits (in the socket
	// buffer) until a receive is posted again, and the group is still
	// joined.
	tx.send(ah, m.RemoteQPN, []byte("after reset"), 0, 0)
	assert.Empty(t, rx.recv(1, 100*time.Millisecond), "a receive posted before the reset was used")
	rx.postRecvs(8, 1)
	got := rx.recv(1, 2*time.Second)
	require.Len(t, got, 1, "the group's datagram after the reset")
	assert.Equal(t, uint64(8), got[0].WRID, "it went to a buffer posted after the reset")
	assert.Equal(t, "after reset", string(rx.buf(got[0])[verbs.GRHSize:]))

	// And the QP sends again (the peer, a member too, had tx's first).
	got = peer.recv(1, 2*time.Second)
	require.Len(t, got, 1)
	assert.Equal(t, "after reset", string(peer.buf(got[0])[verbs.GRHSize:]))
	peer.postRecvs(1, 1)
	rx.send(rxAH, m.RemoteQPN, []byte("sent after reset"), 0, 0)
	got = peer.recv(1, 2*time.Second)
	require.Len(t, got, 1)
	assert.Equal(t, "sent after reset", string(peer.buf(got[0])[verbs.GRHSize:]))
}

// TestResetWaitsForThePort: while the netdev is down Reset fails with
// ErrPortDown and leaves the QP in the error state; once it is up, Reset
// works and the QP receives its group again.
func TestResetWaitsForThePort(t *testing.T) {
	if !testenv.InOwnNetns(t) {
		return
	}
	ip := func(args ...string) {
		t.Helper()
		out, err := exec.Command("ip", args...).CombinedOutput()
		require.NoError(t, err, "ip %v: %s", args, out)
	}
	rx := newEndpoint(t, verbs.QPConfig{})
	tx := newEndpoint(t, verbs.QPConfig{})
	const group = "239.80.3.1"
	m, _ := rx.join(group, false)
	_, ah := tx.join(group, true)
	rx.postRecvs(0, 2)
	require.NoError(t, soft.InjectEvent(rx.id, verbs.Event{Type: verbs.EventQPError}))

	ip("link", "set", "lo", "down")
	err := rx.qp.Reset()
	require.ErrorIs(t, err, verbs.ErrPortDown)
	t.Logf("Reset with lo down: %v", err)
	ready, err := rx.qp.Ready()
	require.NoError(t, err)
	require.False(t, ready, "a failed Reset leaves the QP in the error state")

	ip("link", "set", "lo", "up")
	require.NoError(t, rx.qp.Reset())
	ready, err = rx.qp.Ready()
	require.NoError(t, err)
	require.True(t, ready)
	rx.postRecvs(0, 2)
	tx.send(ah, m.RemoteQPN, []byte("after the flap"), 0, 0)
	got := rx.recv(1, 2*time.Second)
	require.Len(t, got, 1, "the group's datagram after lo down/up and the reset")
	assert.Equal(t, "after the flap", string(rx.buf(got[0])[verbs.GRHSize:]))
}

// TestReadyAfterClose: a closed QP reports ErrClosed, from Ready and
// Reset.
func TestReadyAfterClose(t *testing.T) {
	p, err := verbs.Lookup(verbs.Software)
	require.NoError(t, err)
	id, err := p.Bind(verbs.BindConfig{})
	require.NoError(t, err)
	qp, err := id.CreateQP(verbs.QPConfig{})
	require.NoError(t, err)
	require.NoError(t, id.Close())
	_, err = qp.Ready()
	require.ErrorIs(t, err, verbs.ErrClosed)
	require.ErrorIs(t, qp.Reset(), verbs.ErrClosed)
}

// TestResetNetdevGone: Reset of a QP whose netdev was deleted fails with
// ErrPortDown (the netdev's index names no interface any more), doing
// nothing; the QP stays in the error state.
func TestResetNetdevGone(t *testing.T) {
	if testenv.Device() != "" {
		// As TestBindNetdevWithoutIPv4: the VM's ip makes no named
		// veth peer; the host runs it.
		t.Skip("the VM's ip makes no named veth peer; run on the host")
	}
	if !testenv.InOwnNetns(t, "ip link add rs0 type veth peer name rs1", "ip addr add 10.81.0.1/24 dev rs0",
		"ip link set rs1 up", "ip link set rs0 up") {
		return
	}
	p, err := verbs.Lookup(verbs.Software)
	require.NoError(t, err)
	// The veth carries traffic once linkwatch turns its operstate up
	// (up to a second after its carrier); until then Bind refuses it.
	var id verbs.ID
	require.Eventually(t, func() bool {
		id, err = p.Bind(verbs.BindConfig{Device: "sw-rs0"})
		return err == nil
	}, 10*time.Second, time.Millisecond, "Bind to rs0 never worked")
	defer id.Close()
	qp, err := id.CreateQP(verbs.QPConfig{})
	require.NoError(t, err)
	require.NoError(t, soft.InjectEvent(id, verbs.Event{Type: verbs.EventQPError}))

	out, err := exec.Command("ip", "link", "del", "rs0").CombinedOutput()
	require.NoError(t, err, "ip link del rs0: %s", out)
	err = qp.Reset()
	require.ErrorIs(t, err, verbs.ErrPortDown)
	t.Logf("Reset with rs0 deleted: %v", err)
	ready, err := qp.Ready()
	require.NoError(t, err)
	require.False(t, ready, "a failed Reset leaves the QP in the error state")
}

// After the receives are flushed (as a reset does), the receive queue
// starts again at its first entry: with a depth of one, a coalesced read
// completed by copy (gro.go, which takes the queue's head entry as it is)
// then fills the one receive posted since, and keeps the rest pending.
func TestFlushedRecvQueueOfOne(t *testing.T) {
	src, sport := [4]byte{127, 0, 0, 1}, uint16(0xC126)
	a := newEndpoint(t, verbs.QPConfig{RecvDepth: 1, GRO: true})
	dst := a.qp.UnicastIP()
	read, seg, payloads := coalesced(t, a.qp, []groSeg{{plen: 64}, {plen: 64}}, src, dst, sport, true)
	a.postRecvs(0, 1)
	soft.FlushRecvs(a.qp)
	a.postRecvs(1, 1)
	require.NoError(t, soft.InjectCoalesced(a.qp, 1, read, seg, src, sport, dst))
	wcs := make([]verbs.WC, 4)
	var n int
	var err error
	require.NotPanics(t, func() { n, err = a.qp.RecvCQ().Poll(wcs) })
	require.NoError(t, err)
	require.Equal(t, 1, n, "one receive posted")
	require.Equal(t, uint64(1), wcs[0].WRID)
	require.Equal(t, payloads[0], a.buf(wcs[0])[verbs.GRHSize:])
	a.postRecvs(2, 1)
	n, err = a.qp.RecvCQ().Poll(wcs)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the pending one, once a receive is posted")
	require.Equal(t, payloads[1], a.buf(wcs[0])[verbs.GRHSize:])
}
