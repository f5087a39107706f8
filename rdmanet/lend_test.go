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

func TestReadLendReleaseFromAnotherGoroutine(t *testing.T) {
	t.Parallel()
	g := newGroup()
	rx := listen(t, g, func(lc *rdmanet.ListenConfig) { lc.RecvDepth = 40 })
	tx := listen(t, g)
	ch := make(chan rdmanet.Datagram, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for d := range ch {
			d.Release()
		}
	}()
	for i := 0; i < 300; i++ {
		_, err := tx.WriteTo([]byte("x"), g)
		require.NoError(t, err)
		rx.SetReadDeadline(time.Now().Add(5 * time.Second))
		d, err := rx.ReadLend()
		require.NoError(t, err, "datagram %d: a ring emptied by lending must refill on Release", i)
		ch <- d
	}
	close(ch)
	<-done
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
