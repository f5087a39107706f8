//go:build linux

package rdmanet_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// A datagram written from a SendBuffer arrives as it was, whatever its
// size, and is posted from the registered memory: none is copied or
// posted inline (Stats.SentRegistered).
func TestSendBufferDatagramArrivesIntact(t *testing.T) {
	t.Parallel()
	g := newGroup()
	rx := listen(t, g)
	tx := listen(t, g)
	sb, err := tx.NewSendBuffer(4 * tx.MTU())
	require.NoError(t, err)
	buf := sb.Bytes()
	require.Equal(t, sb.Len(), len(buf))
	require.GreaterOrEqual(t, len(buf), 4*tx.MTU())
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	before := tx.Stats()
	sizes := []int{1, 64, 255, 256, 257, 1000, tx.MTU()}
	for i, n := range sizes {
		off := i * 13 // not aligned
		_, err := tx.WriteTo(buf[off:off+n], g)
		require.NoError(t, err, "%d bytes", n)
		got, _ := mustRead(t, rx)
		require.Equal(t, buf[off:off+n], got, "%d bytes at %d", n, off)
	}
	// WriteBatch too, several from one buffer in one post.
	ga, err := tx.GroupAddr(g)
	require.NoError(t, err)
	ms := make([]rdmanet.Message, 8)
	for i := range ms {
		ms[i] = rdmanet.Message{Buffer: buf[i*100 : i*100+100+i], Addr: ga}
	}
	n, err := tx.WriteBatch(ms)
	require.NoError(t, err)
	require.Equal(t, len(ms), n)
	for i := range ms {
		got, _ := mustRead(t, rx)
		require.Equal(t, ms[i].Buffer, got, "batch message %d", i)
	}
	after := tx.Stats()
	want := uint64(len(sizes) + len(ms))
	assert.Equal(t, want, after.Sent-before.Sent, "Sent")
	assert.Equal(t, want, after.SentRegistered-before.SentRegistered, "SentRegistered")
	assert.Equal(t, uint64(0), after.SentCopied-before.SentCopied, "SentCopied")
	// Every SendBuffer post signals its last send: all are known done
	// without another write.
	require.NoError(t, tx.WaitSends(tx.SendsPosted()))
	assert.Equal(t, tx.SendsPosted(), tx.SendsDone())
	require.NoError(t, sb.Free())
}

// Memory outside every SendBuffer is sent as before (inline, or copied
// into the conn's ring), while a SendBuffer is registered, and may change
// as soon as the write returns.
func TestSendBufferOutsideIsCopied(t *testing.T) {
	t.Parallel()
	g := newGroup()
	rx := listen(t, g)
	tx := listen(t, g)
	sb, err := tx.NewSendBuffer(tx.MTU())
	require.NoError(t, err)
	defer sb.Free()
	before := tx.Stats()
	b := make([]byte, tx.MTU())
	for i := range 20 {
		for j := range b {
			b[j] = byte(i + j)
		}
		_, err := tx.WriteTo(b, g)
		require.NoError(t, err)
		want := append([]byte(nil), b...)
		clear(b) // at once: the write copied it, or posted it inline
		got, _ := mustRead(t, rx)
		require.Equal(t, want, got, "datagram %d", i)
	}
	after := tx.Stats()
	assert.Equal(t, uint64(20), after.Sent-before.Sent)
	assert.Equal(t, uint64(0), after.SentRegistered-before.SentRegistered, "SentRegistered")
	t.Logf("%s: %d of 20 %d-byte datagrams copied into the ring, the rest inline",
		tx.Backend().Name, after.SentCopied-before.SentCopied, tx.MTU())
}

// A program that reuses SendBuffer slots as soon as the completion it
// waited for allows sends the new bytes and never changes a datagram in
// flight: each datagram carries its number and bytes made from it, and
// the receiver checks every one. The slots are few (4) so that each is
// rewritten right after its send completes.
func TestSendBufferReuseAfterDone(t *testing.T) {
	t.Parallel()
	g := newGroup()
	rx := listen(t, g, func(lc *rdmanet.ListenConfig) { lc.RecvDepth = 1024 })
	tx := listen(t, g)
	const slots, total = 4, 4000
	size := tx.MTU()
	sb, err := tx.NewSendBuffer(slots * size)
	require.NoError(t, err)
	buf := sb.Bytes()
	ga, err := tx.GroupAddr(g)
	require.NoError(t, err)

	type result struct {
		got, bad int
		first    string
	}
	res := make(chan result, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var r result
		b := make([]byte, size)
		for r.got < total {
			rx.SetReadDeadline(time.Now().Add(2 * time.Second))
			n, _, err := rx.ReadFrom(b)
			if err != nil {
				break
			}
			r.got++
			if why := checkPattern(b[:n]); why != "" {
				if r.bad == 0 {
					r.first = why
				}
				r.bad++
			}
		}
		res <- r
	}()

	var marks [slots]uint64
	ms := make([]rdmanet.Message, 1)
	waited := 0
	for n := range total {
		i := n % slots
		if marks[i] > tx.SendsDone() {
			waited++
			require.NoError(t, tx.WaitSends(marks[i]))
		}
		slot := buf[i*size : (i+1)*size]
		l := 8 + n%(size-8)
		fillPattern(slot[:l], uint64(n))
		ms[0] = rdmanet.Message{Buffer: slot[:l], Addr: ga}
		if n%2 == 0 {
			_, err = tx.WriteBatch(ms)
		} else {
			_, err = tx.WriteTo(slot[:l], g)
		}
		require.NoError(t, err)
		marks[i] = tx.SendsPosted()
		if n%64 == 63 {
			time.Sleep(time.Millisecond) // let the receiver keep up
		}
	}
	wg.Wait()
	r := <-res
	st := tx.Stats()
	t.Logf("%s: %d of %d received, %d waits for a completion, %d posted from the buffer",
		tx.Backend().Name, r.got, total, waited, st.SentRegistered)
	assert.Zero(t, r.bad, "corrupt datagrams; first: %s", r.first)
	assert.Greater(t, r.got, total/2, "received")
	assert.Equal(t, uint64(total), st.SentRegistered)
	if tx.Backend().Name == rdmanet.BackendRDMACore {
		t.Logf("without the wait: %s", rewriteInFlight(t, rx, tx, g, buf[:size]))
	}
}

// rewriteInFlight rewrites one slot right after each write, without
// waiting for its send, and says how many datagrams arrived corrupt: what
// the wait prevents, where the device reads the memory after the post.
func rewriteInFlight(t *testing.T, rx, tx *rdmanet.Conn, g net.Addr, slot []byte) string {
	const total = 2000
	for n := range total {
		fillPattern(slot, uint64(n))
		_, err := tx.WriteTo(slot, g)
		require.NoError(t, err)
		slot[len(slot)-1] ^= 0xFF // breaks the datagram if it is still being read
	}
	got, bad := 0, 0
	b := make([]byte, len(slot))
	for got < total {
		rx.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		n, _, err := rx.ReadFrom(b)
		if err != nil {
			break
		}
		got++
		if checkPattern(b[:n]) != "" {
			bad++
		}
	}
	return fmt.Sprintf("%d of %d received, %d corrupt", got, total, bad)
}

// fillPattern writes n and bytes made from n.
func fillPattern(b []byte, n uint64) {
	binary.BigEndian.PutUint64(b, n)
	for j := 8; j < len(b); j++ {
		b[j] = byte(n*31 + uint64(j))
	}
}

// checkPattern says what is wrong with a datagram of fillPattern's.
func checkPattern(b []byte) string {
	if len(b) < 8 {
		return fmt.Sprintf("%d bytes", len(b))
	}
	n := binary.BigEndian.Uint64(b)
	for j := 8; j < len(b); j++ {
		if b[j] != byte(n*31+uint64(j)) {
			return fmt.Sprintf("datagram %d: byte %d is %#x, want %#x", n, j, b[j], byte(n*31+uint64(j)))
		}
	}
	return ""
}

// A write of a freed SendBuffer's memory is refused with
// ErrSendBufferFreed, not sent (nor read: the memory is unmapped).
func TestSendBufferFreedRefused(t *testing.T) {
	t.Parallel()
	g := newGroup()
	rx := listen(t, g)
	tx := listen(t, g)
	sb, err := tx.NewSendBuffer(8192)
	require.NoError(t, err)
	old := sb.Bytes()[100:200]
	copy(old, "registered")
	_, err = tx.WriteTo(old, g)
	require.NoError(t, err)
	got, _ := mustRead(t, rx)
	require.Equal(t, "registered", string(got[:10]))

	require.NoError(t, sb.Free())
	require.NoError(t, sb.Free(), "Free is idempotent")
	assert.Nil(t, sb.Bytes())
	sent := tx.Stats().Sent
	_, err = tx.WriteTo(old, g)
	require.ErrorIs(t, err, rdmanet.ErrSendBufferFreed)
	ga, err := tx.GroupAddr(g)
	require.NoError(t, err)
	n, err := tx.WriteBatch([]rdmanet.Message{{Buffer: []byte("before"), Addr: ga}, {Buffer: old, Addr: ga}})
	require.ErrorIs(t, err, rdmanet.ErrSendBufferFreed)
	require.Equal(t, 1, n, "the message before the freed one is sent")
	assert.Equal(t, sent+1, tx.Stats().Sent)
	got, _ = mustRead(t, rx)
	require.Equal(t, "before", string(got))
	expectNothing(t, rx, 50*time.Millisecond)

	// The conn still sends, from Go memory and from a new SendBuffer.
	sb2, err := tx.NewSendBuffer(4096)
	require.NoError(t, err)
	copy(sb2.Bytes(), "again")
	_, err = tx.WriteTo(sb2.Bytes()[:5], g)
	require.NoError(t, err)
	got, _ = mustRead(t, rx)
	require.Equal(t, "again", string(got))
}

// Close unmaps every SendBuffer of the conn (its MR goes with the QP);
// Free after Close does nothing; a closed conn's SendsDone is its
// SendsPosted; WaitSends past what was posted fails at once.
func TestSendBufferClose(t *testing.T) {
	t.Parallel()
	g := newGroup()
	tx := listen(t, g)
	_, err := tx.NewSendBuffer(1 << 20)
	require.NoError(t, err)
	sb, err := tx.NewSendBuffer(3 << 20)
	require.NoError(t, err)
	base := uintptr(unsafe.Pointer(unsafe.SliceData(sb.Bytes())))
	require.True(t, mapped(t, base), "arena mapped at %#x", base)
	_, err = tx.WriteTo(sb.Bytes()[:64], g)
	require.NoError(t, err)
	require.Error(t, tx.WaitSends(tx.SendsPosted()+1))

	require.NoError(t, tx.Close())
	assert.False(t, mapped(t, base), "arena at %#x still mapped after Close", base)
	assert.Nil(t, sb.Bytes())
	require.NoError(t, sb.Free())
	assert.Equal(t, tx.SendsPosted(), tx.SendsDone())
	_, err = tx.NewSendBuffer(4096)
	require.ErrorIs(t, err, net.ErrClosed)
}

// mapped reports whether addr lies in a mapping of the process.
func mapped(t *testing.T, addr uintptr) bool {
	b, err := os.ReadFile("/proc/self/maps")
	require.NoError(t, err)
	for _, l := range strings.Split(string(b), "\n") {
		var lo, hi uintptr
		if _, err := fmt.Sscanf(l, "%x-%x", &lo, &hi); err == nil && lo <= addr && addr < hi {
			return true
		}
	}
	return false
}

// Sends from Go memory after a SendBuffer's (another goroutine's
// unsignaled control traffic) hold none of its memory: a count read after
// them is reached as soon as the SendBuffer's sends completed.
func TestSendsDoneAfterOtherSends(t *testing.T) {
	t.Parallel()
	g := newGroup()
	tx := listen(t, g)
	sb, err := tx.NewSendBuffer(4096)
	require.NoError(t, err)
	for range 3 {
		_, err = tx.WriteTo(sb.Bytes()[:100], g)
		require.NoError(t, err)
		for range 5 {
			_, err = tx.WriteTo(make([]byte, 10), g)
			require.NoError(t, err)
		}
		mark := tx.SendsPosted()
		tx.SetWriteDeadline(time.Now().Add(5 * time.Second))
		require.NoError(t, tx.WaitSends(mark))
		require.GreaterOrEqual(t, tx.SendsDone(), mark)
	}
}

// Sends whose completions never come (a test backend that hides them):
// the memory of a SendBuffer datagram is never reported free, WaitSends
// and Free end at the write deadline, and Free leaves the buffer as it
// was; Close frees it. Not parallel: once unmapped, the address range is
// free for any other test's mmap (the VM's suite saw one reused), and
// the last check would read that mapping.
func TestSendBufferCompletionNeverComes(t *testing.T) {
	g := newGroup()
	lc := testConfig()
	lc.Backend = rdmanet.BackendStuckSends
	if testDevice != "" {
		lc.Backend = rdmanet.BackendStuckSendsRDMACore
	}
	tx, err := lc.ListenMulticast(context.Background(), "rdma", nil, g)
	require.NoError(t, err)
	defer tx.Close()
	sb, err := tx.NewSendBuffer(4096)
	require.NoError(t, err)
	done := tx.SendsDone()
	_, err = tx.WriteTo(sb.Bytes()[:1000], g)
	require.NoError(t, err)
	mark := tx.SendsPosted()
	require.Greater(t, mark, done)
	require.Less(t, tx.SendsDone(), mark, "a send not completed is not done")
	require.NoError(t, tx.SetWriteDeadline(time.Now().Add(50*time.Millisecond)))
	start := time.Now()
	err = tx.WaitSends(mark)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	assert.Less(t, time.Since(start), 2*time.Second)
	err = sb.Free()
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	require.NotNil(t, sb.Bytes(), "a Free that failed leaves the buffer")
	_, err = tx.WriteTo(sb.Bytes()[:10], g)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "the deadline passed")
	require.NoError(t, tx.SetWriteDeadline(time.Time{}))
	_, err = tx.WriteTo(sb.Bytes()[:10], g)
	require.NoError(t, err, "still a SendBuffer")
	base := uintptr(unsafe.Pointer(unsafe.SliceData(sb.Bytes())))
	require.NoError(t, tx.Close())
	assert.False(t, mapped(t, base), "Close unmaps it")
}
