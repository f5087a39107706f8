//go:build linux

package rdmanet_test

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/go-rdma/rdmanet/rdmanet"
	"github.com/stretchr/testify/require"
)

func TestReadLendKeepsPayloadUntilRelease(t *testing.T) {
	t.Parallel()
	g := newGroup()
	rx := listen(t, g, func(lc *rdmanet.ListenConfig) { lc.RecvDepth = 64 })
	tx := listen(t, g)
	// Hold ten lent datagrams while fifty more arrive and are read.
	var held []rdmanet.Datagram
	for i := 0; i < 60; i++ {
		d := lendOne(t, rx, tx, g, fmt.Sprint("msg ", i))
		require.Equal(t, fmt.Sprint("msg ", i), string(d.Payload))
		require.Equal(t, *tx.LocalAddr().(*rdmanet.Addr), d.From)
		if i < 10 {
			held = append(held, d)
		} else {
			d.Release()
			require.Nil(t, d.Payload, "Release clears the lent slice")
			d.Release() // twice: nothing happens
		}
	}
	for i, d := range held {
		require.Equal(t, fmt.Sprint("msg ", i), string(d.Payload), "a lent buffer was reused before Release")
		d.Release()
	}
	// The ring is whole again: another 200 datagrams through a 64-deep ring.
	for i := 0; i < 200; i++ {
		_, err := tx.WriteTo([]byte("again"), g)
		require.NoError(t, err)
		rx.SetReadDeadline(time.Now().Add(5 * time.Second))
		d, err := rx.ReadLend()
		require.NoError(t, err, "datagram %d", i)
		d.Release()
	}
	require.Equal(t, uint64(260), rx.Stats().Received)
}

// With every receive buffer lent, a reader blocks on an empty ring (and
// holds the read lock); Release on another goroutine must still put the
// buffers back, so that the next datagram reaches that reader.
func TestReadLendReleaseFromAnotherGoroutine(t *testing.T) {
	t.Parallel()
	const depth = 40
	g := newGroup()
	rx := listen(t, g, func(lc *rdmanet.ListenConfig) { lc.RecvDepth = depth })
	tx := listen(t, g)
	lent := make([]rdmanet.Datagram, 0, depth)
	for i := 0; i < depth; i++ {
		d := lendOne(t, rx, tx, g, "fill")
		lent = append(lent, d)
	}
	require.NoError(t, rx.SetReadDeadline(time.Time{}))
	got := make(chan string, 1)
	go func() {
		d, err := rx.ReadLend()
		if err != nil {
			got <- err.Error()
			return
		}
		got <- string(d.Payload)
		d.Release()
	}()
	time.Sleep(50 * time.Millisecond) // the reader is blocked on the empty ring
	released := make(chan struct{})
	go func() {
		for i := range lent {
			lent[i].Release()
		}
		close(released)
	}()
	select {
	case <-released:
	case <-time.After(5 * time.Second):
		t.Fatal("Release blocked behind a blocked reader")
	}
	_, err := tx.WriteTo([]byte("after release"), g)
	require.NoError(t, err)
	select {
	case s := <-got:
		require.Equal(t, "after release", s)
	case <-time.After(10 * time.Second):
		t.Fatal("the blocked reader never got the datagram sent after the buffers came back")
	}
}

func TestReadLendAllocatesNothing(t *testing.T) {
	g := newGroup()
	rx := listen(t, g)
	tx := listen(t, g)
	msg := make([]byte, 64)
	allocs := testing.AllocsPerRun(500, func() {
		if _, err := tx.WriteTo(msg, g); err != nil {
			t.Fatal(err)
		}
		d, err := rx.ReadLend()
		if err != nil {
			t.Fatal(err)
		}
		d.Release()
	})
	require.Zero(t, allocs)
}

func TestReadLendAfterClose(t *testing.T) {
	t.Parallel()
	g := newGroup()
	rx := listen(t, g)
	d := lendOne(t, rx, rx, g, "x")
	require.NoError(t, rx.Close())
	d.Release() // after Close: nothing to give back, no panic
	_, err := rx.ReadLend()
	require.ErrorIs(t, err, net.ErrClosed)
}

// heldIntact reads n datagrams with ReadLend while holding every one, and
// checks that no two share a receive buffer and that each payload is still
// the one read: a buffer posted twice would take two datagrams at once.
func heldIntact(t *testing.T, rx, tx *rdmanet.Conn, g *net.UDPAddr, round, n int) {
	t.Helper()
	held := make([]rdmanet.Datagram, 0, n)
	want := make([]string, 0, n)
	for i := 0; i < n; i++ {
		msg := fmt.Sprintf("round %d msg %d", round, i)
		_, err := tx.WriteTo([]byte(msg), g)
		require.NoError(t, err)
		rx.SetReadDeadline(time.Now().Add(5 * time.Second))
		d, err := rx.ReadLend()
		require.NoError(t, err, "round %d datagram %d", round, i)
		held = append(held, d)
		want = append(want, msg)
	}
	bufs := map[*byte]int{}
	for i, d := range held {
		p := unsafe.SliceData(d.Payload)
		if j, dup := bufs[p]; dup {
			t.Fatalf("round %d: datagrams %d and %d were lent the same receive buffer", round, j, i)
		}
		bufs[p] = i
		require.Equal(t, want[i], string(d.Payload), "round %d: datagram %d overwritten while lent", round, i)
	}
	for i := range held {
		held[i].Release()
	}
}

// Release on copies of one Datagram gives its buffer back once: the second
// copy's Release, and a Release after the buffer was lent again, do
// nothing.
func TestReadLendReleaseCopiesPostsOnce(t *testing.T) {
	t.Parallel()
	const depth = 16
	g := newGroup()
	rx := listen(t, g, func(lc *rdmanet.ListenConfig) { lc.RecvDepth = depth })
	tx := listen(t, g)
	for round := 0; round < 6; round++ {
		d := lendOne(t, rx, tx, g, "copied")
		d2 := d
		d.Release()
		d2.Release() // a copy: must not post the buffer again
		d3 := d2
		d3.Release()
		heldIntact(t, rx, tx, g, round, depth-1)
		d2.Release() // stale: the buffer has been lent and given back since
	}
	require.Equal(t, uint64(6*depth), rx.Stats().Received)
}

// Copies released from many goroutines at once: one wins, the buffer is
// posted once (run with -race).
func TestReadLendConcurrentReleaseOfCopies(t *testing.T) {
	t.Parallel()
	const depth = 16
	g := newGroup()
	rx := listen(t, g, func(lc *rdmanet.ListenConfig) { lc.RecvDepth = depth })
	tx := listen(t, g)
	for round := 0; round < 4; round++ {
		d := lendOne(t, rx, tx, g, "shared")
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := 0; i < 8; i++ {
			cp := d
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				cp.Release()
			}()
		}
		close(start)
		wg.Wait()
		heldIntact(t, rx, tx, g, round, depth-1)
	}
}

// Release of a copy after Close, and of a stale copy, does nothing.
func TestReadLendReleaseCopyAfterClose(t *testing.T) {
	t.Parallel()
	g := newGroup()
	rx := listen(t, g)
	d := lendOne(t, rx, rx, g, "x")
	d2 := d
	require.NoError(t, rx.Close())
	d.Release()
	d2.Release()
	_, err := rx.ReadLend()
	require.ErrorIs(t, err, net.ErrClosed)
}

// Release of lent datagrams and their copies racing Close (run with
// -race): no panic, no race, and the conn is closed.
func TestReadLendReleaseRacesClose(t *testing.T) {
	t.Parallel()
	g := newGroup()
	rx := listen(t, g)
	tx := listen(t, g)
	var lent []rdmanet.Datagram
	for i := 0; i < 16; i++ {
		d := lendOne(t, rx, tx, g, "racing")
		lent = append(lent, d, d)
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range lent {
		wg.Add(1)
		go func(d rdmanet.Datagram) {
			defer wg.Done()
			<-start
			d.Release()
		}(lent[i])
	}
	close(start)
	require.NoError(t, rx.Close())
	wg.Wait()
	_, err := rx.ReadLend()
	require.ErrorIs(t, err, net.ErrClosed)
}

// lendOne writes payload from tx to g and lends it back from rx (5 s at
// most).
func lendOne(t *testing.T, rx, tx *rdmanet.Conn, g *net.UDPAddr, payload string) rdmanet.Datagram {
	t.Helper()
	_, err := tx.WriteTo([]byte(payload), g)
	require.NoError(t, err)
	rx.SetReadDeadline(time.Now().Add(5 * time.Second))
	d, err := rx.ReadLend()
	require.NoError(t, err)
	return d
}

// Release on another goroutine while the reader goes on reading (run
// with -race): each round lends a datagram, hands it to a releasing
// goroutine and at once reads the next one, whose read takes the
// returned buffers while the Release may be giving its buffer back.
// Every buffer comes back (a ring of 8 serves 2 datagrams a round for
// 500 rounds), and the reader's unlocked look at the returned buffers
// (takeReturned's fast path, taken only when nothing is lent) races no
// Release.
func TestReleaseWhileReading(t *testing.T) {
	t.Parallel()
	const depth, rounds = 8, 500
	g := newGroup()
	rx := listen(t, g, func(lc *rdmanet.ListenConfig) { lc.RecvDepth = depth })
	tx := listen(t, g)
	toRelease := make(chan rdmanet.Datagram)
	released := make(chan struct{})
	go func() {
		defer close(released)
		for d := range toRelease {
			d.Release()
		}
	}()
	buf := make([]byte, 64)
	for i := 0; i < rounds; i++ {
		want := fmt.Sprintf("lent %d", i)
		d := lendOne(t, rx, tx, g, want)
		require.Equal(t, want, string(d.Payload), "round %d", i)
		toRelease <- d
		want = fmt.Sprintf("copied %d", i)
		_, err := tx.WriteTo([]byte(want), g)
		require.NoError(t, err)
		require.NoError(t, rx.SetReadDeadline(time.Now().Add(5*time.Second)))
		n, _, err := rx.ReadFrom(buf)
		require.NoError(t, err, "round %d: the read after a Release on another goroutine (5 s)", i)
		require.Equal(t, want, string(buf[:n]), "round %d", i)
	}
	close(toRelease)
	select {
	case <-released:
	case <-time.After(5 * time.Second):
		t.Fatal("the releasing goroutine did not finish its Releases")
	}
}
