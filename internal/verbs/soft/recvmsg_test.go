//go:build linux

package soft_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/verbs"
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
		require.Zero(t, dropTotal(a.qp.Drops()), "%s: drops", tag)
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
