//go:build linux

package rdmanet_test

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/rdmanet"
)

// Receive completions with an error status, or too short to hold a GRH,
// are not delivered: those are counted in Dropped[DropWCError], but a
// flushed receive is not a loss and is not counted. Their buffers go
// back to the ring.
func TestBadReceiveCompletionsDropped(t *testing.T) {
	softOnly(t)
	t.Parallel()
	var seen atomic.Int32
	f := rdmanet.Faults{RecvWCs: func(wcs []verbs.WC) {
		for i := range wcs {
			switch seen.Add(1) {
			case 1:
				wcs[i].Status = verbs.WCGeneralErr
			case 3:
				wcs[i].Status = verbs.WCWRFlushErr
			case 4:
				wcs[i].ByteLen = verbs.GRHSize - 1
			}
		}
	}}
	g := newGroup()
	c := listen(t, g, func(lc *rdmanet.ListenConfig) { lc.Backend = faults(t, &f); lc.RecvDepth = 4 })
	for k, n := range c.Stats().Dropped {
		require.NotZero(t, n, "no key for a count of none: %q", k)
	}
	send := func(from, to int) {
		for i := from; i < to; i++ {
			_, err := c.WriteTo([]byte(fmt.Sprint(i)), g)
			require.NoError(t, err)
		}
	}
	send(0, 2)
	b, _ := mustRead(t, c)
	require.Equal(t, "1", string(b), "the good completion after the failed one")
	// Only the receive errors' count: the group's multicast socket is
	// bound to *:4791, so a datagram another test in the namespace sends
	// to a QP that has closed may come to it and count as not-for-us.
	require.Equal(t, uint64(1), c.Stats().Dropped[rdmanet.DropWCError], "%v", c.Stats().Dropped)
	send(2, 5)
	b, _ = mustRead(t, c)
	require.Equal(t, "4", string(b), "the good completion after a flushed and a short one")
	require.Equal(t, uint64(2), c.Stats().Dropped[rdmanet.DropWCError], "the short one counted, the flushed one not: %v", c.Stats().Dropped)
	require.Equal(t, uint64(2), c.Stats().Received)
	// The buffers are posted again: a ring of 4 takes 8 more.
	for i := range 8 {
		_, err := c.WriteTo([]byte(fmt.Sprint("again ", i)), g)
		require.NoError(t, err)
		b, _ := mustRead(t, c)
		require.Equal(t, fmt.Sprint("again ", i), string(b))
	}
}

func nonZero(m map[string]uint64) map[string]uint64 {
	out := map[string]uint64{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

// Where the receive CQ cannot tell without a poll whether completions
// wait, unread cannot tell either while a read holds the CQ, nor when its
// own poll fails.
func TestUnreadUnknownWhileReadHoldsCQOrPollFails(t *testing.T) {
	softOnly(t)
	t.Parallel()
	var failPoll atomic.Bool
	f := rdmanet.Faults{UnreadUnknown: true, RecvPoll: func() error {
		if failPoll.Load() {
			return errFault
		}
		return nil
	}}
	g := newGroup()
	c := listen(t, g, func(lc *rdmanet.ListenConfig) { lc.Backend = faults(t, &f) })
	pending, known := rdmanet.Unread(c)
	require.True(t, known)
	require.False(t, pending)

	got := make(chan string, 1)
	go func() {
		b, _, err := read(t, c, 10*time.Second)
		if err != nil {
			got <- err.Error()
			return
		}
		got <- string(b)
	}()
	require.Eventually(t, func() bool { _, known := rdmanet.Unread(c); return !known }, 5*time.Second, time.Millisecond,
		"unread cannot tell while the read waits on the CQ")
	_, err := c.WriteTo([]byte("wake"), g)
	require.NoError(t, err)
	require.Equal(t, "wake", <-got)

	_, err = c.WriteTo([]byte("waits"), g)
	require.NoError(t, err)
	failPoll.Store(true)
	pending, known = rdmanet.Unread(c)
	require.False(t, known, "its poll failed")
	require.False(t, pending)
	failPoll.Store(false)
	require.Eventually(t, func() bool { pending, known := rdmanet.Unread(c); return pending && known }, 5*time.Second, time.Millisecond)
	b, _ := mustRead(t, c)
	require.Equal(t, "waits", string(b))
}

// A read whose repost of consumed buffers fails returns the post's
// error; the next one, once the post works, reads on.
func TestReadFailsWhenRepostFails(t *testing.T) {
	softOnly(t)
	t.Parallel()
	var fail atomic.Bool
	f := rdmanet.Faults{PostRecv: func() error {
		if fail.Load() {
			return errFault
		}
		return nil
	}}
	g := newGroup()
	c := listen(t, g, func(lc *rdmanet.ListenConfig) { lc.Backend = faults(t, &f); lc.RecvDepth = 4 })
	_, err := c.WriteTo([]byte("one"), g)
	require.NoError(t, err)
	fail.Store(true)
	b, _ := mustRead(t, c) // its buffer's repost fails, and waits
	require.Equal(t, "one", string(b))
	_, _, err = read(t, c, 5*time.Second) // the next poll reposts first
	require.ErrorIs(t, err, errFault)
	fail.Store(false)
	_, err = c.WriteTo([]byte("two"), g)
	require.NoError(t, err)
	b, _ = mustRead(t, c)
	require.Equal(t, "two", string(b))
}

// The QP's own multicast that the device blocked on request counts in
// Loopback, not as a drop; the QP's other drop reasons are drops.
func TestDeviceBlockedLoopbackIsNotADrop(t *testing.T) {
	softOnly(t)
	t.Parallel()
	f := rdmanet.Faults{DropCounts: func(m map[string]uint64) map[string]uint64 {
		m[verbs.DropOwnLoopback] = 3
		m["test-drops"] = 2
		return m
	}}
	c := listen(t, nil, func(lc *rdmanet.ListenConfig) { lc.Backend = faults(t, &f) })
	st := c.Stats()
	require.Equal(t, uint64(3), st.Loopback)
	require.Equal(t, map[string]uint64{"test-drops": 2}, nonZero(st.Dropped))
}

// A QP reset keeps the completions polled and not yet read (their
// buffers are not posted again: they are delivered after it), drops the
// unicast address handles, and keeps a group's old one where a new one
// cannot be made; the group still works after it.
func TestResetKeepsPendingAndAddressHandles(t *testing.T) {
	softOnly(t)
	t.Parallel()
	var failGroupAH atomic.Bool
	f := rdmanet.Faults{CreateAH: func(attr verbs.AHAttr) error {
		if failGroupAH.Load() && attr.DGID.IsMulticast() {
			return errFault
		}
		return nil
	}}
	g := newGroup()
	c := listen(t, g, func(lc *rdmanet.ListenConfig) { lc.Backend = faults(t, &f); lc.RecvDepth = 8 })
	_, err := c.WriteTo([]byte("unicast"), c.LocalAddr())
	require.NoError(t, err)
	require.Equal(t, 1, rdmanet.AHCacheLen(c))
	b, _ := mustRead(t, c)
	require.Equal(t, "unicast", string(b))
	for _, s := range []string{"one", "two", "three"} {
		_, err := c.WriteTo([]byte(s), g)
		require.NoError(t, err)
	}
	ms := []rdmanet.Message{{Buffer: make([]byte, 64)}}
	require.Eventually(t, func() bool { pending, _ := rdmanet.Unread(c); return pending }, 5*time.Second, time.Millisecond)
	n, err := c.ReadBatch(ms) // polls all three, hands out one
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, "one", string(ms[0].Buffer[:ms[0].N]))

	failGroupAH.Store(true)
	require.NoError(t, rdmanet.InjectFaultEvent(c, verbs.Event{Type: verbs.EventQPError}))
	require.Eventually(t, func() bool { return c.Stats().Recoveries == 1 }, 5*time.Second, time.Millisecond)
	require.Zero(t, rdmanet.AHCacheLen(c), "the unicast handles are made anew")
	// Fill the ring: the two held buffers must not have been reposted.
	for i := range 5 {
		_, err := c.WriteTo([]byte(fmt.Sprint("after ", i)), g)
		require.NoError(t, err)
	}
	for _, want := range []string{"two", "three", "after 0", "after 1", "after 2", "after 3", "after 4"} {
		b, _ := mustRead(t, c)
		require.Equal(t, want, string(b))
	}
}

// Where a conn with sockets is told a socket buffer cannot be set, the
// ring is its buffer for that direction, as on rdma-core.
func TestSocketBufferNotSupportedFallsBackToRing(t *testing.T) {
	softOnly(t)
	t.Parallel()
	f := rdmanet.Faults{SetSocketBuffer: func(recv bool) error {
		if !recv {
			return verbs.ErrNotSupported
		}
		return nil
	}}
	c := listen(t, nil, func(lc *rdmanet.ListenConfig) { lc.Backend = faults(t, &f); lc.SendDepth = 16 })
	require.NoError(t, c.SetWriteBuffer(1000), "the ring holds it")
	err := c.SetWriteBuffer(1 << 24)
	require.ErrorIs(t, err, errors.ErrUnsupported)
	require.ErrorContains(t, err, "the send ring is the conn's buffer")
	require.ErrorContains(t, err, "ListenConfig.SendDepth = ")
	require.NoError(t, c.SetReadBuffer(1<<16), "the receive side has its sockets")
}
