package reliable

import (
	"errors"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/go-rdma/rdmanet/rdmanet"
	"github.com/stretchr/testify/require"
)

func writeN(t testing.TB, c *Conn, group net.Addr, from, to uint64, size int) {
	t.Helper()
	b := make([]byte, size)
	for i := from; i < to; i++ {
		_, err := c.WriteTo(payload(b, i), group)
		require.NoError(t, err)
	}
}

// readOne reads one message and returns its number.
func readOne(t testing.TB, c *Conn, size int) uint64 {
	t.Helper()
	buf := make([]byte, c.MaxMessage())
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, _, err := c.ReadFrom(buf)
	require.NoError(t, err)
	i, err := checkMessage(buf[:n], size)
	require.NoError(t, err)
	return i
}

// A late joiner starts at the sender's current position; with
// FromWindowStart, at the oldest message the sender still holds; in the
// sender's first second (starting), at its first message.
func TestLateJoiner(t *testing.T) {
	for _, tc := range []struct {
		what      string
		fromStart bool
		starting  bool // the late joiner first hears the sender in its start
		first     uint64
	}{
		{"current", false, false, 100},
		{"window-start", true, false, 0},
		{"in the sender's start", false, true, 0},
	} {
		t.Run(tc.what, func(t *testing.T) {
			group := newGroup()
			early := listenT(t, group, Config{})
			tx := listenT(t, group, Config{})
			time.Sleep(10 * time.Millisecond)
			writeN(t, tx, group, 0, 100, 100)
			_, err := readAll(early, 100, 100, 5*time.Second)
			require.NoError(t, err)
			if !tc.starting {
				tx.snd.mu.Lock()
				tx.snd.startUntil = 0
				tx.snd.mu.Unlock()
			}
			late := listenT(t, group, Config{FromWindowStart: tc.fromStart})
			time.Sleep(20 * time.Millisecond)
			writeN(t, tx, group, 100, 200, 100)
			first := readOne(t, late, 100)
			require.Equal(t, tc.first, first)
			for want := first + 1; want < 200; want++ {
				require.Equal(t, want, readOne(t, late, 100))
			}
			require.Zero(t, late.Stats().LossesReported)
		})
	}
}

// A sender that vanishes without a word is forgotten after SenderTimeout.
func TestSenderTimeout(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{SenderTimeout: 200 * time.Millisecond, StatusInterval: 5 * time.Millisecond})
	tx := listenT(t, group, Config{})
	time.Sleep(10 * time.Millisecond)
	writeN(t, tx, group, 0, 10, 64)
	require.Equal(t, uint64(0), readOne(t, r, 64))
	tx.snd.stop() // gone: no fin, no more heartbeats (and no more reads of the window the conn unmaps)
	tx.conn.Close()
	time.Sleep(300 * time.Millisecond)
	for i := uint64(1); i < 10; i++ {
		require.Equal(t, i, readOne(t, r, 64), "what arrived before the sender vanished is still read")
	}
	require.Eventually(t, func() bool { return r.Stats().SendersTimedOut == 1 }, 5*time.Second, 5*time.Millisecond)
	r.rcv.mu.Lock()
	defer r.rcv.mu.Unlock()
	require.Empty(t, r.rcv.peers)
}

// Close lingers until receivers have everything: tail loss right before
// Close is repaired. Close is bounded; a second Close, and every later
// call, fails with net.ErrClosed (in a *net.OpError), and no goroutine is
// left.
func TestCloseLinger(t *testing.T) {
	before := runtime.NumGoroutine()
	group := newGroup()
	r := listenDrop(t, group, Config{}, dropFirst(func(s uint64) bool { return s >= 95 }))
	lc := ListenConfig{Conn: *testListenConfig(), Config: Config{Linger: 2 * time.Second}}
	tx, err := lc.ListenMulticast(t.Context(), "rdma", nil, group)
	require.NoError(t, err)
	time.Sleep(10 * time.Millisecond)
	writeN(t, tx, group, 0, 100, 64)
	start := time.Now()
	waitReceivers(t, tx, 1) // known receivers are waited for; unknown ones a few status intervals only
	require.NoError(t, tx.Close())
	took := time.Since(start)
	t.Logf("Close took %v", took)
	require.Less(t, took, time.Second, "Close waits for the receivers' status, not for Linger")
	closedErr(t, tx.Close(), "the second Close")
	_, err = readAll(r, 100, 64, 2*time.Second)
	require.NoError(t, err, "receiver %+v\nsender %+v", r.Stats(), tx.Stats())
	_, err = tx.WriteTo([]byte("x"), group)
	require.ErrorIs(t, err, net.ErrClosed)
	_, _, err = tx.ReadFrom(make([]byte, 10))
	require.ErrorIs(t, err, net.ErrClosed)
	require.NoError(t, r.Close())
	after := 0
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if after = runtime.NumGoroutine(); after <= before {
			break
		}
	}
	require.LessOrEqual(t, after, before, "goroutines after Close")
}

// FlowMin: a write waits while the slowest receiver is a window behind,
// bounded by the write deadline; reading lets it go on, and a receiver
// that goes silent stops holding it back.
func TestFlowMin(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{MaxMessage: 8 << 10, RecvWindow: 64, StatusInterval: 200 * time.Microsecond})
	// ReceiverTimeout 1 s: under emulation on a loaded host a status can
	// be 100 ms late, and a receiver timed out too early gets (honestly)
	// a loss report, which this test is not about.
	tx := listenT(t, group, Config{MaxMessage: 8 << 10, FlowControl: FlowMin, Window: 64, ReceiverTimeout: time.Second})
	time.Sleep(20 * time.Millisecond)
	waitReceivers(t, tx, 1)
	writeN(t, tx, group, 0, 64, 64)
	tx.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	_, err := tx.WriteTo(make([]byte, 64), group)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	var ne net.Error
	require.True(t, errors.As(err, &ne) && ne.Timeout())
	require.NotZero(t, tx.Stats().FlowControlWaits)

	tx.SetWriteDeadline(time.Now().Add(5 * time.Second))
	done := make(chan error, 1)
	go func() {
		b := make([]byte, 64)
		for i := uint64(64); i < 200; i++ {
			if _, err := tx.WriteTo(payload(b, i), group); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	_, err = readAll(r, 200, 64, 5*time.Second)
	require.NoError(t, err)
	require.NoError(t, <-done)
	require.Zero(t, r.Stats().LossesReported)

	// The receiver goes: after ReceiverTimeout the sender writes freely.
	r.Close()
	tx.SetWriteDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	writeN(t, tx, group, 200, 400, 64)
	t.Logf("200 writes after the receiver left took %v", time.Since(start))
}

// Datagrams that are not ours, or not well formed, are counted and
// dropped; the stream goes on.
func TestHostileInput(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{})
	tx := listenT(t, group, Config{})
	lc := testListenConfig()
	raw, err := lc.ListenMulticast(t.Context(), "rdma", nil, group)
	require.NoError(t, err)
	defer raw.Close()
	time.Sleep(10 * time.Millisecond)
	writeN(t, tx, group, 0, 5, 64)
	bad := [][]byte{
		{},
		[]byte("hello"),
		make([]byte, headerLen), // version 0
		func() []byte { // data with fragment >= count
			b := make([]byte, headerLen+4)
			putHeader(b, &header{kind: kindData, frag: 3, nfrag: 2, session: tx.session, seq: 7})
			return b
		}(),
	}
	for _, b := range bad {
		_, err := raw.WriteTo(b, group)
		require.NoError(t, err)
	}
	writeN(t, tx, group, 5, 10, 64)
	_, err = readAll(r, 10, 64, 5*time.Second)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return r.Stats().Malformed == uint64(len(bad)) }, 2*time.Second, time.Millisecond)
}

func TestErrors(t *testing.T) {
	group := newGroup()
	c := listenT(t, group, Config{MaxMessage: 10000})
	_, err := c.WriteTo(make([]byte, 10001), group)
	require.ErrorIs(t, err, rdmanet.ErrMessageTooLong)
	_, err = c.WriteTo([]byte("x"), &net.UDPAddr{IP: net.IPv4(239, 1, 1, 1)})
	require.ErrorIs(t, err, ErrWriteAddr)
	_, err = c.WriteTo([]byte("x"), nil)
	require.NoError(t, err)
	c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	_, _, err = c.ReadFrom(make([]byte, 10))
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	require.Equal(t, 10000, c.MaxMessage())
	_, err = New(c.conn, group, Config{Window: 3})
	require.Error(t, err)
}

// A message longer than the read buffer is truncated, as with UDP.
func TestTruncated(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{})
	tx := listenT(t, group, Config{})
	time.Sleep(10 * time.Millisecond)
	writeN(t, tx, group, 0, 1, 20000)
	buf := make([]byte, 5000)
	r.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, _, err := r.ReadFrom(buf)
	require.NoError(t, err)
	require.Equal(t, 5000, n)
	require.Equal(t, uint64(1), r.Stats().Truncated)
}

// A FlowMin receiver reports the room reading makes at once, not at its
// next periodic status: with no periodic status at all (StatusInterval
// one hour), 500 messages still pass through a 64-datagram receive window.
func TestFlowMinStatusOnRead(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{MaxMessage: 8 << 10, RecvWindow: 64, StatusInterval: time.Hour})
	tx := listenT(t, group, Config{MaxMessage: 8 << 10, FlowControl: FlowMin, Window: 64, ReceiverTimeout: time.Hour})
	time.Sleep(20 * time.Millisecond)
	waitReceivers(t, tx, 1)
	errc := make(chan error, 1)
	go func() {
		// Start reading late, so the writer surely meets the full window
		// and waits (counted) before reading makes room.
		time.Sleep(50 * time.Millisecond)
		_, err := readAll(r, 500, 64, 20*time.Second)
		errc <- err
	}()
	start := time.Now()
	tx.SetWriteDeadline(time.Now().Add(20 * time.Second))
	writeN(t, tx, group, 0, 500, 64)
	require.NoError(t, <-errc)
	t.Logf("500 messages in %v, %d flow-control waits", time.Since(start), tx.Stats().FlowControlWaits)
	require.NotZero(t, tx.Stats().FlowControlWaits)
	require.Zero(t, r.Stats().LossesReported)
}
