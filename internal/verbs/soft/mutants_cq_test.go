//go:build linux

package soft_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/internal/verbs/soft"
)

// Sleeping narrow, a Poll that leaves unicast datagrams unread (wcs full)
// remembers that the unicast socket holds more, whichever socket it read
// first: the next Polls read them without a kick (none is registered, so
// nothing else could tell them).
func TestNarrowPollResumesUnicast(t *testing.T) {
	a := newEndpoint(t, verbs.QPConfig{})
	s := newEndpoint(t, verbs.QPConfig{})
	a.postRecvs(0, 8)
	uah, err := s.qp.CreateAH(verbs.AHAttr{DGID: a.id.Local().GID, IsGlobal: true, HopLimit: 64})
	require.NoError(t, err)
	const n = 4
	for i := range n {
		s.send(uah, a.qp.QPN(), []byte{byte('a' + i)}, 0, 0)
	}
	require.True(t, waitReadable(t, a.qp.RecvCQ().Channel().Fd(), time.Second), "the unicast datagrams")
	require.True(t, soft.RecvWaiterHooksOf(a.qp).Narrow(), "narrow before any unicast was heard")

	wcs := make([]verbs.WC, 1)
	for i := range n {
		deadline := time.Now().Add(2 * time.Second)
		got := 0
		for got == 0 && time.Now().Before(deadline) {
			got, err = a.qp.RecvCQ().Poll(wcs)
			require.NoError(t, err)
		}
		require.Equal(t, 1, got, "datagram %d of %d not read within 2s", i+1, n)
		require.Equal(t, fmt.Sprintf("%c", 'a'+i), string(a.buf(wcs[0])[verbs.GRHSize:]))
	}
}

// A wake that finds several datagrams is a stream: the next wake's read
// takes a whole batch too, not one slot.
func TestWokenStreamReadsBatches(t *testing.T) {
	a := newEndpoint(t, verbs.QPConfig{})
	s := newEndpoint(t, verbs.QPConfig{})
	a.postRecvs(0, 16)
	ah, err := s.qp.CreateAH(verbs.AHAttr{DGID: a.id.Local().GID, IsGlobal: true, HopLimit: 64})
	require.NoError(t, err)
	wcs := make([]verbs.WC, 8)
	for round := range 2 {
		// One batch of three of one length: a GSO run, queued at once.
		wrs := make([]verbs.SendWR, 3)
		for i := range wrs {
			wrs[i] = verbs.SendWR{WRID: uint64(i), SGE: s.sendSGE(i, 64), AH: ah, RemoteQPN: a.qp.QPN(), RemoteQKey: a.qp.QKey()}
		}
		n, err := s.qp.PostSend(wrs)
		require.NoError(t, err)
		require.Equal(t, 3, n)
		require.True(t, waitReadable(t, a.qp.RecvCQ().Channel().Fd(), time.Second), "round %d: the datagrams", round)
		got, err := soft.PollRecvWoken(a.qp, wcs)
		require.NoError(t, err)
		require.Equal(t, 3, got, "round %d: one woken Poll reads the three queued", round)
	}
}
