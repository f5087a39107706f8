package rdmanet_test

import (
	"fmt"
	"net"
	"testing"
	"time"

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
		_, err := tx.WriteTo([]byte(fmt.Sprint("msg ", i)), g)
		require.NoError(t, err)
		rx.SetReadDeadline(time.Now().Add(5 * time.Second))
		d, err := rx.ReadLend()
		require.NoError(t, err)
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
		_, err := tx.WriteTo([]byte("fill"), g)
		require.NoError(t, err)
		rx.SetReadDeadline(time.Now().Add(5 * time.Second))
		d, err := rx.ReadLend()
		require.NoError(t, err)
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
	_, err := rx.WriteTo([]byte("x"), g)
	require.NoError(t, err)
	rx.SetReadDeadline(time.Now().Add(5 * time.Second))
	d, err := rx.ReadLend()
	require.NoError(t, err)
	require.NoError(t, rx.Close())
	d.Release() // after Close: nothing to give back, no panic
	_, err = rx.ReadLend()
	require.ErrorIs(t, err, net.ErrClosed)
}
