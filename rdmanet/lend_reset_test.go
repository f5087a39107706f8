//go:build linux

package rdmanet_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// Buffers lent by ReadLend across a QP reset stay the caller's: the
// reset posts every other slot of the ring again, not the lent ones, so
// twice the ring's depth of datagrams after it leaves every lent
// Payload as it was. The lent slots are spread over the ring's words of
// lent bits (slots 0 to 255 of a 256-deep ring, each datagram i of a
// fresh ring landing in slot i), with slots past 63 among them.
func TestLentBuffersKeptAcrossReset(t *testing.T) {
	t.Parallel()
	if testDevice != "" {
		t.Skip("a wrapped software QP")
	}
	const depth = 256
	g := newGroup()
	rx := listen(t, g, func(lc *rdmanet.ListenConfig) {
		lc.Backend = rdmanet.BackendCountingAHs
		lc.RecvDepth = depth
	})
	tx := listen(t, g)
	keep := map[int]bool{1: true, 63: true, 64: true, 65: true, 127: true, 128: true, 129: true, 191: true, 200: true, 255: true}
	held := map[int]rdmanet.Datagram{}
	for i := range depth {
		d := lendOne(t, rx, tx, g, fmt.Sprint("lent ", i))
		require.Equal(t, fmt.Sprint("lent ", i), string(d.Payload))
		if keep[i] {
			held[i] = d
		} else {
			d.Release()
		}
	}

	require.NoError(t, rdmanet.InjectQPError(rx))
	require.Eventually(t, func() bool { return rx.Stats().Recoveries == 1 }, 5*time.Second, time.Millisecond,
		"waiting for the QP reset after QP_FATAL")

	for i := range 2 * depth {
		d := lendOne(t, rx, tx, g, fmt.Sprint("after ", i))
		require.Equal(t, fmt.Sprint("after ", i), string(d.Payload))
		d.Release()
	}
	for i, d := range held {
		require.Equal(t, fmt.Sprint("lent ", i), string(d.Payload), "datagram %d, lent across the reset, was overwritten", i)
		d.Release()
	}
	require.Zero(t, rx.Stats().Dropped["overflow"], "stats %+v", rx.Stats())
}
