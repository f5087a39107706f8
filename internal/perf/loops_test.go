package perf

import (
	"errors"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pipeEP is an in-memory Endpoint: what it sends goes to out, what it
// receives comes from in; deadlines and Close behave as a conn's.
type pipeEP struct {
	out, in   chan []byte
	mu        sync.Mutex
	dl        time.Time
	closed    chan struct{}
	closeOnce sync.Once
	calls     []int // datagrams per send call
}

// newPipe returns two endpoints: what a sends b receives and back.
func newPipe() (a, b *pipeEP) {
	ab, ba := make(chan []byte, 1024), make(chan []byte, 1024)
	return &pipeEP{out: ab, in: ba, closed: make(chan struct{})}, &pipeEP{out: ba, in: ab, closed: make(chan struct{})}
}

func (e *pipeEP) Send(b []byte) error { return e.SendBatch([][]byte{b}) }

func (e *pipeEP) SendBatch(bs [][]byte) error {
	select {
	case <-e.closed:
		return net.ErrClosed
	default:
	}
	e.mu.Lock()
	e.calls = append(e.calls, len(bs))
	e.mu.Unlock()
	for _, b := range bs {
		e.out <- slices.Clone(b)
	}
	return nil
}

func (e *pipeEP) Recv(b []byte) (int, error) {
	e.mu.Lock()
	dl := e.dl
	e.mu.Unlock()
	var timeout <-chan time.Time
	if !dl.IsZero() {
		d := time.Until(dl)
		if d <= 0 {
			return 0, os.ErrDeadlineExceeded
		}
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case m := <-e.in:
		return copy(b, m), nil
	case <-e.closed:
		return 0, net.ErrClosed
	case <-timeout:
		return 0, os.ErrDeadlineExceeded
	}
}

// RecvBatch blocks for the first datagram, then takes what is queued.
func (e *pipeEP) RecvBatch(bufs [][]byte, ns []int) (int, error) {
	n, err := e.Recv(bufs[0])
	if err != nil {
		return 0, err
	}
	ns[0] = n
	k := 1
	for k < len(bufs) {
		select {
		case m := <-e.in:
			ns[k] = copy(bufs[k], m)
			k++
		default:
			return k, nil
		}
	}
	return k, nil
}

func (e *pipeEP) SetReadDeadline(t time.Time) error {
	e.mu.Lock()
	e.dl = t
	e.mu.Unlock()
	return nil
}

func (e *pipeEP) Close() error { e.closeOnce.Do(func() { close(e.closed) }); return nil }
func (e *pipeEP) MTU() int     { return 65507 }

// queued drains what e has sent and not yet been read, with timeout
// bounding the wait for the first of want.
func queued(t *testing.T, ch chan []byte, want int) [][]byte {
	t.Helper()
	var got [][]byte
	for len(got) < want {
		select {
		case m := <-ch:
			got = append(got, m)
		case <-time.After(5 * time.Second):
			t.Fatalf("waited 5s for datagram %d of %d", len(got)+1, want)
		}
	}
	return got
}

func msg(seq uint64, size int) []byte {
	b := make([]byte, size)
	PutSeq(b, seq)
	return b
}

func marker(total uint64) []byte {
	b := make([]byte, MarkerSize)
	PutSeq(b, Marker)
	PutSeq(b[SeqSize:], total)
	return b
}

func TestFloodNumbersAndBatches(t *testing.T) {
	for _, tc := range []struct {
		batch int
		calls []int
	}{{1, []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}}, {4, []int{4, 4, 2}}} {
		tx, rx := newPipe()
		var sent atomic.Uint64
		f := &Flood{Size: 32, Batch: tc.batch, Count: 10}
		n, el, err := f.Run(tx, &sent)
		require.NoError(t, err)
		assert.Equal(t, uint64(10), n)
		assert.Equal(t, uint64(10), sent.Load())
		assert.Greater(t, el, time.Duration(0))
		assert.Equal(t, tc.calls, tx.calls, "datagrams per call at batch %d", tc.batch)
		for i, m := range queued(t, rx.in, 10) {
			assert.Len(t, m, 32)
			assert.Equal(t, uint64(i), Seq(m), "message %d's sequence number", i)
		}
	}
}

// Pacing holds the sender back: 50 messages at 1000/s take 49 ms at
// least.
func TestFloodRate(t *testing.T) {
	tx, _ := newPipe()
	var sent atomic.Uint64
	n, el, err := (&Flood{Size: 8, Batch: 1, Count: 50, Rate: 1000}).Run(tx, &sent)
	require.NoError(t, err)
	assert.Equal(t, uint64(50), n)
	assert.GreaterOrEqual(t, el, 49*time.Millisecond)
}

func TestFloodStopAndDuration(t *testing.T) {
	stop := make(chan struct{})
	close(stop)
	tx, _ := newPipe()
	var sent atomic.Uint64
	n, _, err := (&Flood{Size: 8, Stop: stop}).Run(tx, &sent)
	require.NoError(t, err)
	assert.Equal(t, uint64(0), n, "a closed Stop sends nothing")

	// A duration ends an unlimited flood (paced, so the pipe never fills).
	n, el, err := (&Flood{Size: 8, Duration: 30 * time.Millisecond, Rate: 10000}).Run(tx, &sent)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, el, 30*time.Millisecond)
	assert.Positive(t, n)

	tx.Close()
	_, _, err = (&Flood{Size: 8, Count: 5}).Run(tx, &sent)
	assert.ErrorIs(t, err, net.ErrClosed, "a send's error ends the flood")
}

// The receiver counts numbered messages, the short ones apart, and stops
// at a marker, whose total it keeps: one of ten lost is 10%.
func TestReceiverTally(t *testing.T) {
	for _, batch := range []int{1, 4} {
		tx, rx := newPipe()
		for i := range uint64(10) {
			if i != 3 {
				require.NoError(t, tx.Send(msg(i, 64)))
			}
		}
		require.NoError(t, tx.Send([]byte("short")))
		require.NoError(t, tx.Send(marker(10)))
		var tl RxTally
		r := &Receiver{Size: 64, Batch: batch, Quiet: time.Second, FirstWait: 5 * time.Second}
		require.NoError(t, r.Run(rx, &tl))
		assert.Equal(t, uint64(9), tl.Received, "batch %d", batch)
		assert.Equal(t, uint64(9), tl.Progress.Load())
		assert.Equal(t, uint64(1), tl.Bad)
		assert.Equal(t, uint64(10), tl.MaxSeq1)
		assert.True(t, tl.Marker)
		assert.Equal(t, uint64(10), tl.Total)
		assert.Equal(t, uint64(10), tl.Expected())
		assert.InDelta(t, 10.0, LossPct(tl.Expected(), tl.Received), 1e-9)
		assert.False(t, tl.First.IsZero())
		assert.False(t, tl.Last.Before(tl.First))
	}
}

// FirstRead is what the first read that brought numbered messages
// carried (a short datagram ahead of them not counted), and OnFirst runs
// once, right after that read: a rate leaves out what was queued before
// its clock started.
func TestReceiverFirstRead(t *testing.T) {
	for _, tc := range []struct {
		batch int
		first uint64
	}{{1, 1}, {8, 3}} {
		tx, rx := newPipe()
		require.NoError(t, tx.Send([]byte("short")))
		for i := range uint64(3) {
			require.NoError(t, tx.Send(msg(i, 64)))
		}
		var tl RxTally
		var calls int
		var atFirst uint64
		r := &Receiver{Size: 64, Batch: tc.batch, Quiet: time.Second, FirstWait: 5 * time.Second, OnFirst: func() {
			calls++
			atFirst = tl.Received
			for i := range uint64(5) { // the rest of the stream, after the first read
				require.NoError(t, tx.Send(msg(3+i, 64)))
			}
			require.NoError(t, tx.Send(marker(8)))
		}}
		require.NoError(t, r.Run(rx, &tl))
		assert.Equal(t, 1, calls, "batch %d: OnFirst calls", tc.batch)
		assert.Equal(t, tc.first, tl.FirstRead, "batch %d", tc.batch)
		assert.Equal(t, tc.first, atFirst, "batch %d: received when OnFirst ran", tc.batch)
		assert.Equal(t, uint64(8), tl.Received, "batch %d", tc.batch)
		assert.Equal(t, uint64(1), tl.Bad, "batch %d", tc.batch)
	}
}

func TestReceiverEnds(t *testing.T) {
	t.Run("limit", func(t *testing.T) {
		tx, rx := newPipe()
		for i := range uint64(20) {
			require.NoError(t, tx.Send(msg(i, 16)))
		}
		var tl RxTally
		require.NoError(t, (&Receiver{Size: 16, Limit: 5}).Run(rx, &tl))
		assert.Equal(t, uint64(5), tl.Received)
	})
	t.Run("nothing within the first wait", func(t *testing.T) {
		_, rx := newPipe()
		var tl RxTally
		err := (&Receiver{Size: 16, FirstWait: 20 * time.Millisecond}).Run(rx, &tl)
		assert.ErrorIs(t, err, ErrNoMessage)
	})
	t.Run("quiet after some", func(t *testing.T) {
		tx, rx := newPipe()
		require.NoError(t, tx.Send(msg(0, 16)))
		var tl RxTally
		require.NoError(t, (&Receiver{Size: 16, Quiet: 20 * time.Millisecond}).Run(rx, &tl))
		assert.Equal(t, uint64(1), tl.Received)
		assert.False(t, tl.Marker)
		assert.Equal(t, uint64(1), tl.Expected(), "no marker: the highest sequence number")
	})
	t.Run("closed", func(t *testing.T) {
		_, rx := newPipe()
		done := make(chan error, 1)
		go func() {
			var tl RxTally
			done <- (&Receiver{Size: 16}).Run(rx, &tl)
		}()
		rx.Close()
		select {
		case err := <-done:
			assert.NoError(t, err, "a closed endpoint ends the count")
		case <-time.After(5 * time.Second):
			t.Fatal("the receiver did not return within 5s of Close")
		}
	})
	t.Run("other error", func(t *testing.T) {
		var tl RxTally
		err := (&Receiver{Size: 16}).Run(&failEP{}, &tl)
		assert.ErrorIs(t, err, errFail)
	})
}

var errFail = errors.New("fails")

type failEP struct{ pipeEP }

func (*failEP) Recv([]byte) (int, error) { return 0, errFail }

// An echo answers until a marker, counting; a pinger matches answers by
// sequence number, skips a late one and gives up on a lost one.
func TestEchoAndPinger(t *testing.T) {
	cli, srv := newPipe()
	var tally EchoTally
	done := make(chan error, 1)
	go func() { done <- Echo(srv, srv, &tally) }()

	p := NewPinger(cli, cli, 64, time.Second)
	for i := range 5 {
		half, ok, err := p.RoundTrip()
		require.NoError(t, err)
		require.True(t, ok, "round trip %d answered", i)
		assert.Positive(t, half)
	}
	assert.Equal(t, uint64(5), p.Seq())

	// A stale answer (sequence 2) waits ahead of the next one: skipped.
	cli.in <- msg(2, 64)
	_, ok, err := p.RoundTrip()
	require.NoError(t, err)
	assert.True(t, ok)

	require.NoError(t, cli.Send(marker(6)))
	select {
	case err := <-done:
		require.NoError(t, err, "the echo ends at a marker")
	case <-time.After(5 * time.Second):
		t.Fatal("the echo did not end within 5s of the marker")
	}
	assert.Equal(t, uint64(6), tally.Served.Load())
	assert.False(t, tally.Last.Before(tally.First))

	// Nobody answers now: lost after the timeout, not an error.
	p = NewPinger(cli, cli, 64, 30*time.Millisecond)
	_, ok, err = p.RoundTrip()
	require.NoError(t, err)
	assert.False(t, ok)
}

func TestSendMarkers(t *testing.T) {
	tx, rx := newPipe()
	SendMarkers(tx, 1234)
	for _, m := range queued(t, rx.in, 5) {
		total, ok := markerTotal(m)
		assert.True(t, ok)
		assert.Equal(t, uint64(1234), total)
	}
	_, ok := markerTotal(msg(7, 16))
	assert.False(t, ok, "a numbered message is no marker")
	_, ok = markerTotal(msg(Marker, 8))
	assert.False(t, ok, "a marker too short to carry a total")
}

// Copies of one Receiver made before its first Run keep buffers of their
// own: run side by side (under -race), each counts its own stream.
func TestReceiversInParallel(t *testing.T) {
	cfg := Receiver{Size: 64, Batch: 4, Quiet: time.Second, FirstWait: 5 * time.Second}
	const n = 200
	var wg sync.WaitGroup
	tallies := make([]RxTally, 3)
	errs := make([]error, len(tallies))
	for i := range tallies {
		tx, rx := newPipe()
		r := cfg
		wg.Go(func() { errs[i] = r.Run(rx, &tallies[i]) })
		for s := range uint64(n) {
			require.NoError(t, tx.Send(msg(s*uint64(i+1), 64)))
		}
		require.NoError(t, tx.Send(marker(n)))
	}
	wg.Wait()
	for i := range tallies {
		require.NoError(t, errs[i])
		assert.Equal(t, uint64(n), tallies[i].Received, "receiver %d", i)
		assert.Equal(t, uint64((n-1)*(i+1)+1), tallies[i].MaxSeq1, "receiver %d saw its own stream", i)
	}
}
