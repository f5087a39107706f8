//go:build linux

package rdmanet_test

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/rdmanet"
)

// Send completions that fail with an errno are counted by it, and the
// next write returns the first of them, as the kernel's error from
// sendmmsg; a later failure does not replace it.
func TestSendCompletionErrnosFirstReturned(t *testing.T) {
	softOnly(t)
	t.Parallel()
	var fail atomic.Bool
	f := rdmanet.Faults{SendWCs: func(wcs []verbs.WC) {
		if !fail.Load() {
			return
		}
		for i := range wcs {
			wcs[i].Status, wcs[i].Errno = verbs.WCGeneralErr, uint32(syscall.ENOBUFS)
			if wcs[i].WRID == 0 {
				wcs[i].Errno = uint32(syscall.EPERM)
			}
		}
	}}
	g := newGroup()
	// SendDepth 4: every send is signaled, so each has a completion.
	c := listen(t, g, func(lc *rdmanet.ListenConfig) { lc.Backend = faults(t, &f); lc.SendDepth = 4 })
	ga, err := c.GroupAddr(g)
	require.NoError(t, err)
	fail.Store(true)
	n, err := c.WriteBatch([]rdmanet.Message{{Buffer: []byte("one"), Addr: ga}, {Buffer: []byte("two"), Addr: ga}})
	require.NoError(t, err)
	require.Equal(t, 2, n)
	_, err = c.WriteTo([]byte("three"), g)
	require.ErrorIs(t, err, rdmanet.ErrEarlierSendFailed)
	require.ErrorIs(t, err, syscall.EPERM, "the first failure's errno")
	require.NotErrorIs(t, err, syscall.ENOBUFS)
	var se *os.SyscallError
	require.ErrorAs(t, err, &se)
	require.Equal(t, "sendmmsg", se.Syscall)
	st := c.Stats()
	require.Equal(t, uint64(2), st.SendErrors)
	require.Equal(t, map[string]uint64{rdmanet.SendErrNotPermitted: 1, rdmanet.SendErrNoBuffers: 1}, st.SendFailed)
	// Taken: the next write goes.
	fail.Store(false)
	_, err = c.WriteTo([]byte("four"), g)
	require.NoError(t, err)
}

// A lone datagram the kernel refuses with EMSGSIZE (the route's MTU fell
// below the conn's) is ErrMessageTooLong as well as EMSGSIZE, and
// counted; an error of the provider's own is returned as it is and not
// counted as the kernel's refusal.
func TestSendRefusedAtPost(t *testing.T) {
	softOnly(t)
	t.Parallel()
	var refuse atomic.Pointer[error]
	f := rdmanet.Faults{PostSend: func(wrs []verbs.SendWR) (bool, int, error) {
		if e := refuse.Load(); e != nil && len(wrs) == 1 {
			return true, 0, *e
		}
		return false, 0, nil
	}}
	g := newGroup()
	c := listen(t, g, func(lc *rdmanet.ListenConfig) { lc.Backend = faults(t, &f) })
	var emsgsize error = os.NewSyscallError("sendto", syscall.EMSGSIZE)
	refuse.Store(&emsgsize)
	_, err := c.WriteTo([]byte("x"), g)
	require.ErrorIs(t, err, rdmanet.ErrMessageTooLong)
	require.ErrorIs(t, err, syscall.EMSGSIZE)
	require.ErrorContains(t, err, "sendto: message too long (the route's MTU is now smaller than MTU())")
	require.Equal(t, map[string]uint64{rdmanet.SendErrMessageTooLong: 1}, c.Stats().SendFailed)

	refuse.Store(&errFault)
	_, err = c.WriteTo([]byte("x"), g)
	require.ErrorIs(t, err, errFault)
	require.NotErrorIs(t, err, rdmanet.ErrMessageTooLong)
	require.Equal(t, map[string]uint64{rdmanet.SendErrMessageTooLong: 1}, c.Stats().SendFailed)
	require.Equal(t, uint64(1), c.Stats().SendErrors)
	require.Zero(t, c.Stats().Sent)
}

// A unicast peer whose address handle cannot be made fails the write
// with the provider's error; one with an errno (no route) is counted by
// it, one without is not.
func TestUnicastAddressHandleFailure(t *testing.T) {
	softOnly(t)
	t.Parallel()
	var fail atomic.Pointer[error]
	f := rdmanet.Faults{CreateAH: func(attr verbs.AHAttr) error {
		if e := fail.Load(); e != nil && !attr.DGID.IsMulticast() {
			return *e
		}
		return nil
	}}
	c := listen(t, nil, func(lc *rdmanet.ListenConfig) { lc.Backend = faults(t, &f) })
	peer := c.LocalAddr()
	var unreach error = fmt.Errorf("create AH: %w", syscall.ENETUNREACH)
	fail.Store(&unreach)
	_, err := c.WriteTo([]byte("x"), peer)
	require.ErrorIs(t, err, syscall.ENETUNREACH)
	require.Equal(t, map[string]uint64{rdmanet.SendErrNetUnreachable: 1}, c.Stats().SendFailed)
	fail.Store(&errFault)
	_, err = c.WriteTo([]byte("x"), peer)
	require.ErrorIs(t, err, errFault)
	require.Equal(t, map[string]uint64{rdmanet.SendErrNetUnreachable: 1}, c.Stats().SendFailed)
	require.Equal(t, uint64(1), c.Stats().SendErrors, "the error without an errno is not counted")
	var perm error = fmt.Errorf("create AH: %w", syscall.EPERM) // errno 1
	fail.Store(&perm)
	_, err = c.WriteTo([]byte("x"), peer)
	require.ErrorIs(t, err, syscall.EPERM)
	require.Equal(t, map[string]uint64{rdmanet.SendErrNetUnreachable: 1, rdmanet.SendErrNotPermitted: 1}, c.Stats().SendFailed)
	require.Zero(t, rdmanet.AHCacheLen(c), "no handle kept for a failed one")
	fail.Store(nil)
	_, err = c.WriteTo([]byte("x"), peer)
	require.NoError(t, err)
	require.Equal(t, 1, rdmanet.AHCacheLen(c))
}

// A send CQ whose poll fails fails the write that polls it (WriteBatch,
// WriteTo) and WaitSends, with the poll's error.
func TestSendPollFailure(t *testing.T) {
	softOnly(t)
	t.Parallel()
	var fail atomic.Bool
	f := rdmanet.Faults{SendPoll: func() error {
		if fail.Load() {
			return errFault
		}
		return nil
	}}
	g := newGroup()
	c := listen(t, g, func(lc *rdmanet.ListenConfig) { lc.Backend = faults(t, &f) })
	ga, err := c.GroupAddr(g)
	require.NoError(t, err)
	sb, err := c.NewSendBuffer(4096)
	require.NoError(t, err)
	_, err = c.WriteTo(sb.Bytes()[:100], g) // signaled: its completion waits in the CQ
	require.NoError(t, err)

	fail.Store(true)
	n, err := c.WriteBatch([]rdmanet.Message{{Buffer: []byte("x"), Addr: ga}})
	require.ErrorIs(t, err, errFault)
	require.Zero(t, n)
	_, err = c.WriteTo([]byte("x"), g)
	require.ErrorIs(t, err, errFault)
	require.ErrorIs(t, c.WaitSends(c.SendsPosted()), errFault)
	fail.Store(false)
	require.NoError(t, c.WaitSends(c.SendsPosted()))
	require.Equal(t, uint64(1), c.Stats().Sent)
}

// Datagrams over the QP's inline limit are copied into the send ring's
// slots (counted in SentCopied), those within it posted inline; with a
// send ring whose depth is not a power of two and smaller than a batch,
// a WriteBatch posts a ring's worth at a time, and every datagram
// arrives as written.
func TestCopiedSendsThroughSmallRing(t *testing.T) {
	softOnly(t)
	t.Parallel()
	var mu sync.Mutex
	var posts []int
	f := rdmanet.Faults{
		MaxInline: func(int) int { return 64 },
		PostSend: func(wrs []verbs.SendWR) (bool, int, error) {
			mu.Lock()
			posts = append(posts, len(wrs))
			mu.Unlock()
			return false, 0, nil
		},
	}
	g := newGroup()
	c := listen(t, g, func(lc *rdmanet.ListenConfig) {
		lc.Backend = faults(t, &f)
		lc.SendDepth = 12
		lc.RecvDepth = 256
	})
	ga, err := c.GroupAddr(g)
	require.NoError(t, err)
	payload := func(i int) []byte {
		if i%3 == 0 {
			return []byte(fmt.Sprintf("small %d", i)) // inline
		}
		return bytes.Repeat([]byte{byte(i)}, 65+i) // copied
	}
	const lone, batched = 30, 30
	for i := range lone {
		_, err := c.WriteTo(payload(i), g)
		require.NoError(t, err)
	}
	ms := make([]rdmanet.Message, batched)
	for i := range ms {
		ms[i] = rdmanet.Message{Buffer: payload(lone + i), Addr: ga}
	}
	mu.Lock()
	posts = nil
	mu.Unlock()
	n, err := c.WriteBatch(ms)
	require.NoError(t, err)
	require.Equal(t, batched, n)
	mu.Lock()
	require.Equal(t, []int{12, 12, 6}, posts, "a ring's worth a post")
	mu.Unlock()
	for i := range lone + batched {
		b, _ := mustRead(t, c)
		require.Equal(t, payload(i), b, "datagram %d", i)
	}
	st := c.Stats()
	require.Equal(t, uint64(lone+batched), st.Sent)
	require.Equal(t, uint64((lone+batched)*2/3), st.SentCopied, "the two in three over the inline limit")
}

// A WriteBatch that cannot get a free slot before the write deadline
// returns what it sent, with the deadline's error.
func TestWriteBatchDeadlineWaitingForSlots(t *testing.T) {
	softOnly(t)
	t.Parallel()
	g := newGroup()
	c := listen(t, g, func(lc *rdmanet.ListenConfig) { lc.Backend = rdmanet.BackendStuckSends; lc.SendDepth = 4 })
	ga, err := c.GroupAddr(g)
	require.NoError(t, err)
	ms := make([]rdmanet.Message, 10)
	for i := range ms {
		ms[i] = rdmanet.Message{Buffer: []byte{byte(i)}, Addr: ga}
	}
	require.NoError(t, c.SetWriteDeadline(time.Now().Add(50*time.Millisecond)))
	n, err := c.WriteBatch(ms)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	require.Equal(t, 4, n, "the ring's four slots")
	require.Equal(t, uint64(4), c.Stats().Sent)
}

// SendsDone counts a SendBuffer send done only once a completion for it
// (its own, or a later send's: the send queue completes in order) has
// been polled. Here the first send completes and the second never does
// (the FaultBackend's PostSend takes it and posts nothing): SendsDone is
// 1 and stays 1, so the second send's bytes are not the program's again.
func TestSendsDoneStopsAtTheLastCompletion(t *testing.T) {
	softOnly(t)
	t.Parallel()
	var swallow atomic.Bool
	f := rdmanet.Faults{PostSend: func(wrs []verbs.SendWR) (bool, int, error) {
		if swallow.Load() {
			return true, len(wrs), nil // "posted", never to complete
		}
		return false, 0, nil
	}}
	g, c, sb := sendBufferConn(t, &f)
	b := sb.Bytes()
	copy(b, "first")
	_, err := c.WriteTo(b[:5], g)
	require.NoError(t, err)
	require.NoError(t, c.WaitSends(1))
	got, _ := mustRead(t, c)
	require.Equal(t, "first", string(got))

	swallow.Store(true)
	copy(b[8:], "second")
	_, err = c.WriteTo(b[8:14], g)
	require.NoError(t, err)
	require.Equal(t, uint64(2), c.SendsPosted())
	for range 3 {
		require.Equal(t, uint64(1), c.SendsDone(), "SendsDone with the second send not completed")
	}
	// Free waits for it too: with the write deadline past, it fails and
	// leaves the buffer mapped.
	require.NoError(t, c.SetWriteDeadline(time.Now().Add(-time.Second)))
	err = sb.Free()
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "Free of a buffer whose send has not completed")
	require.Equal(t, "second", string(b[8:14]))
}

// A SendBuffer datagram within the QP's inline limit (the software QP's is
// 4096, at least the MTU) is posted inline, the provider copying it at the
// post, from the shortest to an MTU; with SetSendBufferInline off, by its
// SGE alone.
func TestSendBufferPostedInlineWithinTheLimit(t *testing.T) {
	softOnly(t)
	t.Parallel()
	var mu sync.Mutex
	var inline []bool
	f := rdmanet.Faults{PostSend: func(wrs []verbs.SendWR) (bool, int, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, wr := range wrs {
			inline = append(inline, wr.Flags&verbs.SendInline != 0)
		}
		return false, 0, nil
	}}
	g, c, sb := sendBufferConn(t, &f)
	b := sb.Bytes()
	posted := func() []bool {
		mu.Lock()
		defer mu.Unlock()
		return append([]bool(nil), inline...)
	}
	for _, n := range []int{1, c.MTU()} {
		_, err := c.WriteTo(b[:n], g)
		require.NoError(t, err)
		got, _ := mustRead(t, c)
		require.Len(t, got, n)
	}
	require.Equal(t, []bool{true, true}, posted(), "1 B and an MTU (%d B) posted inline", c.MTU())
	rdmanet.SetSendBufferInline(c, false)
	_, err := c.WriteTo(b[:1], g)
	require.NoError(t, err)
	mustRead(t, c)
	require.Equal(t, []bool{true, true, false}, posted(), "inline off: by the SGE")
}

// sendBufferConn listens on a new group through f's backend and gives the
// conn a SendBuffer of an MTU (freed by Close).
func sendBufferConn(t *testing.T, f *rdmanet.Faults) (*net.UDPAddr, *rdmanet.Conn, *rdmanet.SendBuffer) {
	t.Helper()
	g := newGroup()
	c := listen(t, g, func(lc *rdmanet.ListenConfig) { lc.Backend = faults(t, f) })
	sb, err := c.NewSendBuffer(c.MTU())
	require.NoError(t, err)
	return g, c, sb
}
