//go:build linux

package rdmanet_test

import (
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/rdmanet"
	"github.com/stretchr/testify/require"
)

func softOnly(t *testing.T) {
	if testDevice != "" {
		t.Skip("uses the software backend's event injection")
	}
}

func TestDeviceRemovalFailsBlockedCalls(t *testing.T) {
	softOnly(t)
	g := newGroup()
	lc := rdmanet.ListenConfig{Backend: rdmanet.BackendSoftware}
	warm, err := lc.ListenMulticast(t.Context(), "rdma", nil, newGroup())
	require.NoError(t, err) // what the process keeps (a QPN block, a netlink subscription) is no conn's
	warm.Close()
	gor := runtime.NumGoroutine()
	fds := countFDs(t)
	c, err := lc.ListenMulticast(t.Context(), "rdma", nil, g)
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() {
		_, _, err := c.ReadFrom(make([]byte, 10))
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, rdmanet.InjectEvent(c, verbs.Event{Type: verbs.EventDeviceRemoval}))
	select {
	case err := <-errc:
		require.ErrorIs(t, err, rdmanet.ErrDeviceRemoved)
		require.ErrorContains(t, err, "device removed")
	case <-time.After(time.Second):
		t.Fatal("a blocked ReadFrom did not return within a second of DEVICE_REMOVAL")
	}
	_, err = c.WriteTo([]byte("x"), g)
	require.ErrorIs(t, err, rdmanet.ErrDeviceRemoved)
	_, _, err = c.ReadFrom(make([]byte, 10))
	require.ErrorIs(t, err, rdmanet.ErrDeviceRemoved)
	require.NoError(t, c.Close())
	_, _, err = c.ReadFrom(make([]byte, 10))
	require.ErrorIs(t, err, net.ErrClosed, "after Close, closed wins")
	waitGoroutines(t, gor)
	require.Equal(t, fds, countFDs(t))
}

func TestMulticastErrorRejoins(t *testing.T) {
	softOnly(t)
	g := newGroup()
	rx := listen(t, g)
	tx := listen(t, g)
	ga, err := rx.GroupAddr(g)
	require.NoError(t, err)
	require.NoError(t, rdmanet.InjectEvent(rx, verbs.Event{Type: verbs.EventMulticastError, MGID: ga.GID}))
	deadline := time.Now().Add(5 * time.Second)
	for rx.Stats().Rejoins == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	require.Equal(t, uint64(1), rx.Stats().Rejoins)
	_, err = tx.WriteTo([]byte("after rejoin"), g)
	require.NoError(t, err)
	b, _ := mustRead(t, rx)
	require.Equal(t, "after rejoin", string(b))
	_, err = rx.WriteTo([]byte("own"), g)
	require.NoError(t, err, "the rejoined membership's AH works")
}

func TestBlockedWriteDeadlineAndClose(t *testing.T) {
	softOnly(t)
	g := newGroup()
	lc := rdmanet.ListenConfig{Backend: rdmanet.BackendStuckSends, SendDepth: 8}
	c, err := lc.ListenMulticast(t.Context(), "rdma", nil, g)
	require.NoError(t, err)
	defer c.Close()
	// Eight sends fill the ring; none ever completes.
	for i := 0; i < 8; i++ {
		_, err := c.WriteTo([]byte("x"), g)
		require.NoError(t, err)
	}
	require.NoError(t, c.SetWriteDeadline(time.Now().Add(30*time.Millisecond)))
	start := time.Now()
	_, err = c.WriteTo([]byte("x"), g)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	require.True(t, isTimeout(err))
	require.GreaterOrEqual(t, time.Since(start), 25*time.Millisecond, "the write must have waited")
	require.NoError(t, c.SetWriteDeadline(time.Time{}))

	errc := make(chan error, 2)
	for i := 0; i < 2; i++ {
		go func() {
			_, err := c.WriteTo([]byte("x"), g)
			errc <- err
		}()
	}
	select {
	case err := <-errc:
		t.Fatalf("WriteTo returned %v with the send ring full", err)
	case <-time.After(50 * time.Millisecond):
	}
	require.NoError(t, c.Close())
	for i := 0; i < 2; i++ {
		select {
		case err := <-errc:
			require.ErrorIs(t, err, net.ErrClosed)
		case <-time.After(5 * time.Second):
			t.Fatal("Close did not unblock WriteTo")
		}
	}
}

// An event a provider read off the channel during a join, and queued, must
// still reach the conn although the channel fd will not wake it again.
func TestEventQueuedDuringJoinIsSeen(t *testing.T) {
	softOnly(t)
	lc := rdmanet.ListenConfig{Backend: rdmanet.BackendQuietEvents}
	c, err := lc.ListenMulticast(t.Context(), "rdma", nil, nil)
	require.NoError(t, err)
	defer c.Close()
	time.Sleep(50 * time.Millisecond) // the event goroutine is asleep on the fd
	require.NoError(t, c.JoinGroup(nil, newGroup()))
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, _, err = c.ReadFrom(make([]byte, 10))
	require.ErrorIs(t, err, rdmanet.ErrDeviceRemoved, "the DEVICE_REMOVAL queued by Join was never handled")
}
