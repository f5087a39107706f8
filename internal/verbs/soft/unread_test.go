//go:build linux

package soft_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/internal/verbs/soft"
)

// The send CQ's Unread sees the completions its ring holds, always
// knowing: none before a send, one after a signaled send until Poll takes
// it, none once closed.
func TestSendCQUnread(t *testing.T) {
	e := newEndpoint(t, verbs.QPConfig{})
	_, ah := e.join("239.202.9.7", true)
	cq := e.qp.SendCQ()
	check := func(want bool, what string) { t.Helper(); requireUnread(t, cq, want, what) }
	check(false, "nothing sent")
	wr := verbs.SendWR{WRID: 1, SGE: e.sendSGE(0, 64), AH: ah, RemoteQPN: verbs.MulticastQPN,
		RemoteQKey: e.qp.QKey(), Flags: verbs.SendSignaled}
	n, err := e.qp.PostSend([]verbs.SendWR{wr})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	check(true, "a signaled send's completion queued")
	wcs := make([]verbs.WC, 4)
	n, err = cq.Poll(wcs)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	check(false, "polled")
	n, err = e.qp.PostSend([]verbs.SendWR{wr})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.NoError(t, e.id.Close())
	check(false, "closed, a completion left")
}

// The receive CQ's Unread sees a datagram queued on either socket, and
// what a coalesced read left for the next Poll, without taking any; it
// always knows, and once closed nothing is pending.
func TestRecvCQUnread(t *testing.T) {
	s := newEndpoint(t, verbs.QPConfig{})
	a := newEndpoint(t, verbs.QPConfig{GRO: true})
	m, _ := a.join("239.202.9.8", false)
	_, gah := s.join("239.202.9.8", true)
	uah, err := s.qp.CreateAH(verbs.AHAttr{DGID: a.id.Local().GID, IsGlobal: true, HopLimit: 64})
	require.NoError(t, err)
	a.postRecvs(0, nBufs)
	cq := a.qp.RecvCQ()
	check := func(want bool, what string) { t.Helper(); requireUnread(t, cq, want, what) }
	// waitUnread waits for a datagram sent to reach a's socket (loopback
	// delivers it from a softirq that may run after the send returns).
	waitUnread := func(what string) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Second)
		for {
			pending, known := cq.Unread()
			require.True(t, known, what)
			if pending {
				return
			}
			require.True(t, time.Now().Before(deadline), "%s: Unread never saw it", what)
			time.Sleep(time.Millisecond)
		}
	}
	wcs := make([]verbs.WC, 4)
	take := func(want int, what string) {
		t.Helper()
		n, err := cq.Poll(wcs)
		require.NoError(t, err)
		require.Equal(t, want, n, what)
	}
	check(false, "nothing sent")

	s.send(uah, a.qp.QPN(), []byte("unicast"), 0, 0)
	waitUnread("a unicast datagram")
	check(true, "a unicast datagram, asked again")
	take(1, "the unicast datagram")
	check(false, "the unicast datagram taken")

	s.send(gah, m.RemoteQPN, []byte("multicast"), 0, 0)
	waitUnread("a multicast datagram")
	take(1, "the multicast datagram")
	check(false, "the multicast datagram taken")

	// A coalesced read of three, polled one completion at a time: the
	// sockets are empty, the read's other two wait.
	src, sport := [4]byte{127, 0, 0, 1}, uint16(0xC124)
	read, seg, _ := coalesced(t, a.qp, []groSeg{{plen: 64}, {plen: 64}, {plen: 64}}, src, a.qp.UnicastIP(), sport, true)
	require.NoError(t, soft.InjectCoalesced(a.qp, 1, read, seg, src, sport, a.qp.UnicastIP()))
	check(true, "a coalesced read not yet polled")
	one := wcs[:1]
	for i := range 3 {
		check(true, "before the coalesced read's completion")
		n, err := cq.Poll(one)
		require.NoError(t, err)
		require.Equal(t, 1, n, "completion %d of the coalesced read", i)
	}
	check(false, "the coalesced read taken whole")

	s.send(uah, a.qp.QPN(), []byte("left"), 0, 0)
	waitUnread("a datagram left at close")
	require.NoError(t, a.id.Close())
	check(false, "closed, a datagram left")
}

// The receive CQ's Unread never waits for a datagram: it asks poll(2)
// with no timeout. rdmanet asks it under the read lock; 200 asks of an
// empty CQ take far less than the 200 ms one of a 1 ms wait each would.
func TestRecvCQUnreadDoesNotWait(t *testing.T) {
	a := newEndpoint(t, verbs.QPConfig{})
	a.postRecvs(0, 1)
	cq := a.qp.RecvCQ()
	const asks = 200
	start := time.Now()
	for range asks {
		pending, known := cq.Unread()
		require.True(t, known)
		require.False(t, pending, "nothing sent")
	}
	require.Less(t, time.Since(start), asks*time.Millisecond, "%d Unreads of an empty CQ", asks)
}

// requireUnread checks that cq's Unread knows, and says want.
func requireUnread(t *testing.T, cq verbs.CQ, want bool, what string) {
	t.Helper()
	pending, known := cq.Unread()
	require.True(t, known, what)
	require.Equal(t, want, pending, what)
}
