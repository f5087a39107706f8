//go:build linux

package rdmanet_test

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/go-rdma/rdmanet/rdmanet"
	"github.com/stretchr/testify/require"
)

// rdmanet's own calls on a closed conn answer as its Close doc says:
// errors wrap net.ErrClosed, Groups is empty, Stats keeps the counters of
// the moment of Close, and the conn's own facts stay readable.
func TestClosedConnAnswersConsistently(t *testing.T) {
	t.Parallel()
	g := newGroup()
	c := listen(t, g)
	require.NoError(t, c.JoinGroup(nil, newGroup()))
	_, err := c.WriteTo([]byte("counted"), g)
	require.NoError(t, err)
	mustRead(t, c)
	ga, err := c.GroupAddr(g)
	require.NoError(t, err)
	local, mtu, backend := c.LocalAddr().String(), c.MTU(), c.Backend()
	require.Len(t, c.Groups(), 2)
	before := c.Stats()

	// Stats may race Close (run with -race).
	stop := make(chan struct{})
	statsDone := make(chan struct{})
	go func() {
		defer close(statsDone)
		for {
			select {
			case <-stop:
				return
			default:
				c.Stats()
			}
		}
	}()
	require.NoError(t, c.Close())
	close(stop)
	<-statsDone

	require.Empty(t, c.Groups(), "Groups after Close")
	_, err = c.GroupAddr(g)
	closedErr(t, err, "GroupAddr")
	closedErr(t, c.JoinGroup(nil, newGroup()), "JoinGroup")
	closedErr(t, c.LeaveGroup(nil, g), "LeaveGroup")
	closedErr(t, c.SetMulticastLoopback(false), "SetMulticastLoopback")
	// The calls that count count nothing done with their error.
	for _, call := range []struct {
		name string
		f    func() (int, error)
	}{
		{"WriteTo", func() (int, error) { return c.WriteTo([]byte("x"), g) }},
		{"ReadBatch", func() (int, error) { return c.ReadBatch(make([]rdmanet.Message, 4)) }},
		{"ReadBatch of none", func() (int, error) { return c.ReadBatch(nil) }},
		{"WriteBatch", func() (int, error) { return c.WriteBatch([]rdmanet.Message{{Buffer: []byte("x"), Addr: ga}}) }},
		{"WriteBatch of none", func() (int, error) { return c.WriteBatch(nil) }},
	} {
		n, err := call.f()
		closedErr(t, err, call.name)
		require.Zero(t, n, "%s's count with its error: got %d, want 0", call.name, n)
	}
	_, err = c.ReadLend()
	closedErr(t, err, "ReadLend")
	n, from, err := c.ReadFromAddr(make([]byte, 10))
	closedErr(t, err, "ReadFromAddr")
	require.Zero(t, n, "ReadFromAddr's length with its error: got %d, want 0", n)
	require.Zero(t, from, "ReadFromAddr's sender with its error: got %v, want the zero Addr", from)
	// net.PacketConn's callers process the n bytes ReadFrom returns
	// before its error: with the error there are none, and no sender.
	n, addr, err := c.ReadFrom(make([]byte, 10))
	closedErr(t, err, "ReadFrom")
	require.Zero(t, n, "ReadFrom's length with its error: got %d, want 0", n)
	require.Nil(t, addr, "ReadFrom's sender with its error: got %v, want nil", addr)
	err = c.Close()
	closedErr(t, err, "second Close")
	require.Equal(t, "close", err.(*net.OpError).Op)
	// What the conn was stays readable.
	require.Equal(t, local, c.LocalAddr().String())
	require.Equal(t, mtu, c.MTU())
	require.Equal(t, backend, c.Backend())
	require.True(t, c.MulticastLoopback())
	after := c.Stats()
	require.Equal(t, before.Sent, after.Sent)
	require.Equal(t, before.Received, after.Received)
	require.Equal(t, before.Dropped, after.Dropped, "drop counts taken at Close")
}

// A past deadline wins over a datagram already polled from the CQ (the
// second of a batch), on ReadFromAddr, ReadBatch and ReadLend too; a past
// write deadline fails WriteBatch before it sends anything.
func TestPastDeadlineEveryCall(t *testing.T) {
	t.Parallel()
	g := newGroup()
	rx, tx := listen(t, g), listen(t, g)
	for i := 0; i < 3; i++ {
		_, err := tx.WriteTo([]byte(fmt.Sprint("m", i)), g)
		require.NoError(t, err)
	}
	time.Sleep(50 * time.Millisecond)
	mustRead(t, rx) // polls the batch: the others wait as completions
	require.NoError(t, rx.SetReadDeadline(time.Now().Add(-time.Second)))
	n, from, err := rx.ReadFromAddr(make([]byte, 10))
	timeoutErr(t, err, "ReadFromAddr")
	require.Zero(t, n, "ReadFromAddr's length with its error: got %d, want 0", n)
	require.Zero(t, from, "ReadFromAddr's sender with its error: got %v, want the zero Addr", from)
	_, err = rx.ReadBatch(make([]rdmanet.Message, 4))
	timeoutErr(t, err, "ReadBatch")
	_, err = rx.ReadLend()
	timeoutErr(t, err, "ReadLend")
	require.NoError(t, rx.SetReadDeadline(time.Time{}))
	for i := 1; i < 3; i++ {
		b, _ := mustRead(t, rx)
		require.Equal(t, fmt.Sprint("m", i), string(b), "a timed-out read took a datagram")
	}

	ga, err := tx.GroupAddr(g)
	require.NoError(t, err)
	sent := tx.Stats().Sent
	require.NoError(t, tx.SetWriteDeadline(time.Now().Add(-time.Second)))
	n, err = tx.WriteBatch([]rdmanet.Message{{Buffer: []byte("late"), Addr: ga}})
	timeoutErr(t, err, "WriteBatch")
	require.Zero(t, n)
	require.Equal(t, sent, tx.Stats().Sent, "nothing was sent")
}
