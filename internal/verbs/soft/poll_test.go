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

// The pace a wake reads at is learnt from wakes, and a Poll of the wide
// set (not after a wake) changes it only after a one-slot read (a
// probe): then datagrams already waiting make it a stream. A Poll that
// finds nothing says nothing of the pace: a stream stays one.
func TestWidePollKeepsPace(t *testing.T) {
	a := newEndpoint(t, verbs.QPConfig{})
	s := newEndpoint(t, verbs.QPConfig{})
	a.postRecvs(0, 16)
	ah, err := s.qp.CreateAH(verbs.AHAttr{DGID: a.id.Local().GID, IsGlobal: true, HopLimit: 64})
	require.NoError(t, err)
	wcs := make([]verbs.WC, 8)
	post := func(what string, n int) {
		t.Helper()
		wrs := make([]verbs.SendWR, n)
		for i := range wrs {
			wrs[i] = verbs.SendWR{WRID: uint64(i), SGE: s.sendSGE(i, 64), AH: ah, RemoteQPN: a.qp.QPN(), RemoteQKey: a.qp.QKey()}
		}
		got, err := s.qp.PostSend(wrs)
		require.NoError(t, err)
		require.Equal(t, n, got)
		require.True(t, waitReadable(t, a.qp.RecvCQ().Channel().Fd(), time.Second), "%s: the datagrams", what)
	}
	poll := func(what string, woken bool, want int) {
		t.Helper()
		var got int
		var err error
		if woken {
			got, err = soft.PollRecvWoken(a.qp, wcs)
		} else {
			got, err = a.qp.RecvCQ().Poll(wcs)
		}
		require.NoError(t, err)
		require.Equal(t, want, got, what)
	}

	// A fresh CQ reads wakes as a stream; an empty wide Poll keeps that.
	poll("an empty Poll", false, 0)
	post("stream", 3)
	poll("a wake after an empty Poll reads the batch", true, 3)

	// One datagram a wake: request/response, wakes read one slot...
	post("single", 1)
	poll("one datagram", true, 1)
	post("burst", 3)
	poll("a single-paced wake reads one slot", true, 1)
	// ...and a wide Poll that finds the rest waiting after that probe
	// makes it a stream again.
	poll("the rest, by a wide Poll", false, 2)
	post("stream again", 3)
	poll("a wake after the probe found more reads the batch", true, 3)

	// Back to single; a probe after which a wide Poll finds nothing
	// leaves it single.
	post("single again", 1)
	poll("one datagram", true, 1)
	post("one more", 1)
	poll("a one-slot read: a probe", true, 1)
	poll("nothing after the probe", false, 0)
	post("burst", 3)
	poll("still single: a wake reads one slot", true, 1)
	poll("the rest", false, 2)
}

// Sleeping narrow, a Poll after a one-slot read (a probe) that finds a
// multicast datagram already waiting makes the pace a stream; one that
// finds a unicast datagram, read because the watch saw it there, says
// nothing of the pace (the watch's kick, not the probe, found it).
func TestNarrowProbePace(t *testing.T) {
	a := newEndpoint(t, verbs.QPConfig{})
	s := newEndpoint(t, verbs.QPConfig{})
	m, _ := a.join("239.201.9.1", false)
	_, ah := s.join("239.201.9.1", true)
	uah, err := s.qp.CreateAH(verbs.AHAttr{DGID: a.id.Local().GID, IsGlobal: true, HopLimit: 64})
	require.NoError(t, err)
	kk := soft.RecvWaiterHooksOf(a.qp)
	nfd := kk.NarrowFd()
	var k kicks
	require.NoError(t, kk.SetKick(k.kick))
	a.postRecvs(0, 16)
	wcs := make([]verbs.WC, 8)
	poll := func(what string, woken bool, want int, pace string) {
		t.Helper()
		var got int
		var err error
		if woken {
			got, err = soft.PollRecvWoken(a.qp, wcs)
		} else {
			got, err = a.qp.RecvCQ().Poll(wcs)
		}
		require.NoError(t, err)
		require.Equal(t, want, got, what)
		require.Equal(t, pace, soft.Pace(a.qp), "%s: the pace after", what)
	}
	mc := func(what string) {
		t.Helper()
		s.send(ah, m.RemoteQPN, []byte(what), 0, 0)
		require.True(t, waitReadable(t, nfd, 2*time.Second), "%s: the multicast datagram", what)
	}

	require.True(t, kk.Narrow(), "narrow before any unicast")
	poll("a narrow Poll of nothing", false, 0, "stream")
	mc("one")
	poll("one datagram a wake: request/response", true, 1, "single")
	mc("two")
	poll("a one-slot read: a probe", false, 1, "probe")

	before := k.n.Load()
	s.send(uah, a.qp.QPN(), []byte("unicast"), 0, 0)
	require.True(t, k.waitFor(t, before+1, 2*time.Second), "a unicast datagram did not kick")
	poll("a probe that finds the watch's unicast datagram", false, 1, "probe")
	require.Equal(t, "unicast", string(a.buf(wcs[0])[verbs.GRHSize:]))

	mc("three")
	poll("a probe that finds a multicast datagram waiting", false, 1, "stream")
	require.Equal(t, "three", string(a.buf(wcs[0])[verbs.GRHSize:]))
}

// Polls not after a wake take turns at which socket they read first, so
// that a busy socket does not starve the other: with datagrams waiting on
// both, two one-completion Polls in a row take one from each.
func TestPollsTakeTurns(t *testing.T) {
	a := newEndpoint(t, verbs.QPConfig{})
	s := newEndpoint(t, verbs.QPConfig{})
	m, _ := a.join("239.201.9.2", false)
	_, ah := s.join("239.201.9.2", true)
	uah, err := s.qp.CreateAH(verbs.AHAttr{DGID: a.id.Local().GID, IsGlobal: true, HopLimit: 64})
	require.NoError(t, err)
	a.postRecvs(0, 8)
	for i := range 2 {
		s.send(ah, m.RemoteQPN, []byte{'m', byte('0' + i)}, 0, 0)
	}
	for i := range 2 {
		s.send(uah, a.qp.QPN(), []byte{'u', byte('0' + i)}, 0, 0)
	}
	require.True(t, waitReadable(t, soft.RecvWaiterHooksOf(a.qp).NarrowFd(), 2*time.Second), "the multicast datagrams")
	require.True(t, waitReadable(t, soft.UnicastFd(a.qp), 2*time.Second), "the unicast datagrams")

	wcs := make([]verbs.WC, 1)
	var from []byte // the socket of each datagram read: 'm' or 'u'
	for range 2 {
		n, err := a.qp.RecvCQ().Poll(wcs)
		require.NoError(t, err)
		require.Equal(t, 1, n, "a Poll with datagrams on both sockets")
		from = append(from, a.buf(wcs[0])[verbs.GRHSize])
		a.postRecvs(int(wcs[0].WRID), 1)
	}
	require.NotEqual(t, from[0], from[1], "two Polls in a row read %q: the same socket first", from)
	require.Len(t, a.recv(2, 2*time.Second), 2, "the other two")
}

// A Poll whose pending datagrams (the rest of a coalesced read) are all
// dropped goes on to read the sockets, as one with nothing pending does:
// it does not return 0 while a datagram waits. Here a coalesced read of
// two datagrams with bad ICRCs is pending, and a good datagram is queued
// on the unicast socket: one Poll completes it.
func TestPollReadsOnAfterPendingAllDropped(t *testing.T) {
	src, sport := [4]byte{127, 0, 0, 1}, uint16(0xC125)
	s := newEndpoint(t, verbs.QPConfig{})
	a := newEndpoint(t, verbs.QPConfig{GRO: true})
	dst := a.qp.UnicastIP()
	read, seg, _ := coalesced(t, a.qp, []groSeg{{plen: 64, badICRC: true}, {plen: 64, badICRC: true}}, src, dst, sport, true)
	a.postRecvs(0, 8)
	ah, err := s.qp.CreateAH(verbs.AHAttr{DGID: a.id.Local().GID, IsGlobal: true, HopLimit: 64})
	require.NoError(t, err)
	s.send(ah, a.qp.QPN(), []byte("queued"), 0, 0)
	waitUnread(t, a) // on the socket, before anything is pending
	require.NoError(t, soft.InjectCoalesced(a.qp, 1, read, seg, src, sport, dst))
	wcs := make([]verbs.WC, 8)
	n, err := a.qp.RecvCQ().Poll(wcs)
	require.NoError(t, err)
	require.Equal(t, 1, n, "one Poll: the queued datagram, after the pending ones were dropped")
	require.Equal(t, []byte("queued"), a.buf(wcs[0])[verbs.GRHSize:])
	require.Equal(t, soft.Drops{BadICRC: 2}, a.drops())
}
