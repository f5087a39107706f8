//go:build linux

package soft_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// The overflow a received datagram's control message reports
// (SO_RXQ_OVFL: the socket's sk_drops when the datagram was queued) is
// noted as the datagram is read, not only when Drops asks (SO_MEMINFO,
// which needs the socket). So once the QP is closed, and its sockets with
// it, Drops still counts every drop that a datagram read before had
// reported. Drops is not called before the close: it would read
// SO_MEMINFO and hide where the count came from.
func TestOverflowNotedFromReceivedDatagrams(t *testing.T) {
	a := newEndpoint(t, verbs.QPConfig{})
	s := newEndpoint(t, verbs.QPConfig{SendDepth: 64})
	m, _ := a.join("239.201.8.2", false)
	_, ah := s.join("239.201.8.2", true)
	wrs := make([]verbs.SendWR, 64)
	for i := range wrs {
		wrs[i] = verbs.SendWR{WRID: uint64(i), SGE: s.sendSGE(0, 1024), AH: ah, RemoteQPN: m.RemoteQPN, RemoteQKey: m.QKey}
	}
	const total = 190 * 64 // far past the socket buffer, with no receive posted
	for sent := 0; sent < total; sent += len(wrs) {
		n, err := s.qp.PostSend(wrs)
		require.NoError(t, err)
		require.Equal(t, len(wrs), n)
	}
	// Drain what the socket kept, then send a marker (7 bytes), queued
	// after every drop: its control message reports them all. Read until
	// the marker.
	got := 0
	for {
		a.postRecvs(0, nBufs)
		wcs := a.recv(nBufs, 200*time.Millisecond)
		got += len(wcs)
		if len(wcs) < nBufs {
			break // receives are still posted for the marker
		}
	}
	require.Less(t, got, total, "nothing was dropped")
	marker := wrs[:1:1]
	marker[0].SGE = s.sendSGE(0, 7)
	n, err := s.qp.PostSend(marker)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	deadline := time.Now().Add(10 * time.Second)
	for seen := false; !seen; {
		require.True(t, time.Now().Before(deadline), "no marker in 10 s")
		wcs := a.recv(1, 100*time.Millisecond)
		for _, wc := range wcs {
			if wc.ByteLen == verbs.GRHSize+7 {
				seen = true
			} else {
				got++
			}
		}
		if len(wcs) > 0 {
			a.postRecvs(0, len(wcs))
		}
	}
	require.NoError(t, a.id.Close())
	d := a.qp.Drops()
	t.Logf("sent %d: received %d, overflow after close %d", total, got, d.Overflow)
	require.Equal(t, uint64(total-got), d.Overflow, "drops the datagrams read had reported")
}
