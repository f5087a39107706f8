//go:build linux

package perf

import (
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/testenv"
	"github.com/go-rdma/rdmanet/rdmanet"
)

// The endpoints over loopback (run in a network namespace of their own,
// as .ci/run does): what one sends the other reads, one at a time and in
// batches larger than the endpoints' first batchSlots.

var groupN atomic.Uint32

func testGroup() *net.UDPAddr {
	n := groupN.Add(1) + uint32(os.Getpid()%200)*64
	return &net.UDPAddr{IP: net.IPv4(239, 79, byte(n>>8), byte(n)), Port: 33000 + int(n%1000)}
}

func softwareHere(t *testing.T) {
	t.Helper()
	if testenv.Device() != "" {
		t.Skip("software backend on loopback: runs outside the rxe VM, where rxe holds UDP 4791")
	}
}

// exchange sends n numbered datagrams from tx, one at a time and then in
// one batch, and reads them from rx the same ways.
func exchange(t *testing.T, tx, rx Endpoint, n int) {
	t.Helper()
	require.NoError(t, rx.SetReadDeadline(time.Now().Add(5*time.Second)))
	buf := make([]byte, 2048)
	for i := range 3 {
		require.NoError(t, tx.Send(msg(uint64(i), 64)))
		k, err := rx.Recv(buf)
		require.NoError(t, err, "datagram %d", i)
		require.Equal(t, 64, k)
		assert.Equal(t, uint64(i), Seq(buf))
	}
	bs := make([][]byte, n)
	bufs := make([][]byte, n)
	for i := range bs {
		bs[i], bufs[i] = msg(uint64(100+i), 64), make([]byte, 2048)
	}
	require.NoError(t, tx.SendBatch(bs))
	ns := make([]int, n)
	for got := 0; got < n; {
		k, err := rx.RecvBatch(bufs[got:], ns[got:])
		require.NoError(t, err, "after %d of %d in batches", got, n)
		for i := got; i < got+k; i++ {
			require.Equal(t, 64, ns[i])
			assert.Equal(t, uint64(100+i), Seq(bufs[i]), "batch datagram %d", i)
		}
		got += k
	}
}

func TestRDMAEndpoints(t *testing.T) {
	softwareHere(t)
	lc := rdmanet.ListenConfig{Backend: rdmanet.BackendSoftware, DisableLoopback: true}
	g := testGroup()
	rx, err := ListenRDMA(lc, nil, g)
	require.NoError(t, err)
	defer rx.Close()
	lc.SendOnly = true
	tx, err := ListenRDMA(lc, nil, g)
	require.NoError(t, err)
	defer tx.Close()
	exchange(t, tx, rx, batchSlots+36)

	// Lend: the length, without a copy.
	rx.Lend = true
	require.NoError(t, tx.Send(msg(7, 80)))
	n, err := rx.Recv(nil)
	require.NoError(t, err)
	assert.Equal(t, 80, n)
	rx.Lend = false

	// Unicast, to a peer's *rdmanet.Addr.
	lc.SendOnly = false
	y, err := ListenRDMA(lc, nil, testGroup())
	require.NoError(t, err)
	defer y.Close()
	to, err := NewRDMA(rx.C, y.C.LocalAddr())
	require.NoError(t, err)
	exchange(t, to, y, 8)
}

func TestUDPEndpoints(t *testing.T) {
	lo, err := Loopback()
	require.NoError(t, err)
	for _, connected := range []bool{false, true} {
		t.Run(fmt.Sprintf("connected=%v", connected), func(t *testing.T) {
			g := testGroup()
			rx, err := ListenUDP(lo, g, SocketBuffer)
			require.NoError(t, err)
			defer rx.Close()
			tx, err := DialUDP(lo, nil, g, connected)
			require.NoError(t, err)
			defer tx.Close()
			if connected {
				assert.Equal(t, g.String(), tx.C.RemoteAddr().String())
			} else {
				assert.Nil(t, tx.C.RemoteAddr())
			}
			exchange(t, tx, rx, batchSlots+36)
			got, err := rx.RcvBuf()
			require.NoError(t, err)
			assert.Positive(t, got)
			assert.LessOrEqual(t, got, 2*SocketBuffer, "getsockopt: twice the grant at most")
		})
	}
}
