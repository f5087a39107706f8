//go:build linux

package rdmanet_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/testenv"
	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/rdmanet"
)

// A QP error (QP_FATAL) on the software backend is recovered the way
// rdma-core's is: the conn resets its QP in place (Stats.Recoveries), a
// reader blocked meanwhile stays blocked and then gets the next
// datagram, and the conn keeps its address, its group and its sends.
func TestSoftQPErrorRecoveredInPlace(t *testing.T) {
	softOnly(t)
	g := newGroup()
	rx := softListen(t, g)
	tx := softListen(t, g, sendOnly)
	self := rx.LocalAddr().String()

	type read struct {
		msg string
		err error
	}
	got := make(chan read, 1)
	go func() {
		buf := make([]byte, 64)
		n, _, err := rx.ReadFrom(buf)
		got <- read{string(buf[:n]), err}
	}()
	time.Sleep(20 * time.Millisecond) // the reader blocks
	require.NoError(t, rdmanet.InjectEvent(rx, verbs.Event{Type: verbs.EventQPError}))
	deadline := time.Now().Add(5 * time.Second)
	for rx.Stats().Recoveries == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	require.Equal(t, uint64(1), rx.Stats().Recoveries, "the QP was not reset after QP_FATAL")
	select {
	case r := <-got:
		t.Fatalf("the blocked reader returned during the reset: %q, %v", r.msg, r.err)
	default:
	}

	_, err := tx.WriteTo([]byte("after the reset"), g)
	require.NoError(t, err)
	select {
	case r := <-got:
		require.NoError(t, r.err)
		assert.Equal(t, "after the reset", r.msg)
	case <-time.After(2 * time.Second):
		t.Fatal("the reader got nothing after the reset")
	}
	assert.Equal(t, self, rx.LocalAddr().String(), "the QPN is kept")

	// Its own sends work again (loopback brings them back).
	_, err = rx.WriteTo([]byte("own"), g)
	require.NoError(t, err)
	require.NoError(t, rx.SetReadDeadline(time.Now().Add(2*time.Second)))
	buf := make([]byte, 64)
	n, _, err := rx.ReadFrom(buf)
	require.NoError(t, err)
	assert.Equal(t, "own", string(buf[:n]))
	st := rx.Stats()
	assert.Zero(t, st.SendErrors, "no send failed: the QP was reset before any")
	assert.Equal(t, uint64(1), st.Recoveries)
}

// A software conn's Stats.Device is its network namespace's UDP MIB since
// the conn opened: a receiver that does not read fills its socket buffer,
// the kernel drops the rest and counts them in UdpRcvbufErrors, the same
// number as the conn's own overflow drops when it is the one socket that
// dropped.
func TestSoftStatsDeviceCountsRcvbufErrors(t *testing.T) {
	if !testenv.InOwnNetns(t) {
		return
	}
	g := newGroup()
	rx := softListen(t, g)
	tx := softListen(t, g, sendOnly)
	st := rx.Stats()
	require.NotNil(t, st.Device, "no device counters on the software backend")
	assert.Zero(t, st.Device["UdpRcvbufErrors"])

	const n = 8000
	msg := make([]byte, 1024)
	for range n {
		_, err := tx.WriteTo(msg, g)
		require.NoError(t, err)
	}
	st = rx.Stats()
	t.Logf("after %d datagrams: Dropped %v, Device %v", n, st.Dropped, st.Device)
	require.Positive(t, st.Dropped[rdmanet.DropOverflow], "no overflow: the flood did not fill the socket buffer")
	assert.Equal(t, st.Dropped[rdmanet.DropOverflow], st.Device["UdpRcvbufErrors"])
	assert.GreaterOrEqual(t, st.Device["UdpInErrors"], st.Device["UdpRcvbufErrors"])
	_, has := st.Dropped[rdmanet.DropDeviceOverflow]
	assert.False(t, has, "the namespace's counts are not the conn's drops")
	require.NoError(t, rx.Close())
	assert.Nil(t, rx.Stats().Device, "no device counters after Close")
}
