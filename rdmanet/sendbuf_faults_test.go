//go:build linux

package rdmanet_test

import (
	"net"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/rdmanet"
)

// NewSendBuffer fails, making nothing, for a size that maps nothing and
// where its memory cannot be registered.
func TestNewSendBufferFailures(t *testing.T) {
	softOnly(t)
	t.Parallel()
	var fail atomic.Bool
	f := rdmanet.Faults{RegisterMemory: func() error {
		if fail.Load() {
			return errFault
		}
		return nil
	}}
	c := listen(t, nil, func(lc *rdmanet.ListenConfig) { lc.Backend = faults(t, &f) })
	for _, size := range []int{0, -1} {
		sb, err := c.NewSendBuffer(size)
		require.Error(t, err, "size %d", size)
		require.Nil(t, sb)
		var oe *net.OpError
		require.ErrorAs(t, err, &oe)
		require.Equal(t, "register", oe.Op)
	}
	fail.Store(true)
	sb, err := c.NewSendBuffer(4096)
	require.ErrorIs(t, err, errFault)
	require.Nil(t, sb)
	fail.Store(false)
	sb, err = c.NewSendBuffer(4096)
	require.NoError(t, err)
	require.Equal(t, 4096, sb.Len())
}

// A Free whose MR deregistration fails returns its error; the buffer is
// freed all the same (its memory is unmapped: a later write of it would
// fault, so it is refused).
func TestSendBufferFreeDeregistrationFailure(t *testing.T) {
	softOnly(t)
	t.Parallel()
	f := rdmanet.Faults{MRClose: func() error { return errFault }}
	c := listen(t, nil, func(lc *rdmanet.ListenConfig) { lc.Backend = faults(t, &f) })
	sb, err := c.NewSendBuffer(4096)
	require.NoError(t, err)
	err = sb.Free()
	require.ErrorIs(t, err, errFault)
	var oe *net.OpError
	require.ErrorAs(t, err, &oe)
	require.Equal(t, "free", oe.Op)
	require.Nil(t, sb.Bytes(), "freed")
	require.NoError(t, sb.Free(), "idempotent")
	require.Equal(t, 1, rdmanet.FreedSpans(c))
}

// A datagram that starts in a SendBuffer and runs past its end is
// refused, naming both, and nothing is sent.
func TestSendBufferOverrunRefused(t *testing.T) {
	t.Parallel()
	g := newGroup()
	c := listen(t, g)
	sb, err := c.NewSendBuffer(4096)
	require.NoError(t, err)
	b := sb.Bytes()
	// Only its address and length are read: the write is refused before
	// any byte is.
	over := unsafe.Slice(&b[len(b)-10], 20)
	_, err = c.WriteTo(over, g)
	require.ErrorContains(t, err, "20-byte buffer at offset 4086 runs past the end of its 4096-byte SendBuffer")
	require.Zero(t, c.Stats().Sent)
	_, err = c.WriteTo(b[len(b)-10:], g) // the same start, within it
	require.NoError(t, err)
}

// A SendBuffer's Free after device removal, its send not yet reaped,
// fails with ErrDeviceRemoved and leaves the buffer as it was.
func TestSendBufferFreeAfterDeviceRemoval(t *testing.T) {
	softOnly(t)
	t.Parallel()
	c, g, sb := sentFromSendBuffer(t)
	removeDevice(t, c, g)
	require.ErrorIs(t, sb.Free(), rdmanet.ErrDeviceRemoved)
	require.NotNil(t, sb.Bytes(), "not freed")
	require.NoError(t, c.Close())
	require.NoError(t, sb.Free(), "Close freed it")
}

// A SendBuffer whose sends had all completed before the device was
// removed has nothing to wait for: WaitSends of a count already reached
// answers nil, and Free frees the buffer then and there (its MR went
// with the device), where a Free with a send not yet reaped fails
// (TestSendBufferFreeAfterDeviceRemoval).
func TestSendBufferFreeAfterDeviceRemovalSendsDone(t *testing.T) {
	softOnly(t)
	t.Parallel()
	c, g, sb := sentFromSendBuffer(t)
	posted := c.SendsPosted()
	require.NoError(t, c.SetWriteDeadline(time.Now().Add(10*time.Second)))
	require.NoError(t, c.WaitSends(posted), "waiting for the SendBuffer's send to complete")
	removeDevice(t, c, g)
	require.Equal(t, posted, c.SendsDone())
	require.NoError(t, c.WaitSends(posted), "every send waited for completed before the removal")
	require.NoError(t, sb.Free(), "its sends completed: nothing to wait for")
	require.Nil(t, sb.Bytes(), "freed")
}

// Addr.IP is the IP a GID carries, nil for no GID; a Datagram never lent
// releases nothing.
func TestAddrIPAndZeroDatagram(t *testing.T) {
	t.Parallel()
	require.Nil(t, (&rdmanet.Addr{}).IP())
	require.Nil(t, (&rdmanet.Addr{QPN: 5}).IP())
	a, err := rdmanet.ParseAddr("::ffff:10.99.0.1/0x000011")
	require.NoError(t, err)
	require.Equal(t, "10.99.0.1", a.IP().String())
	var d rdmanet.Datagram
	d.Payload = []byte("x")
	d.Release()
	require.Nil(t, d.Payload)
}

// sentFromSendBuffer is a conn on the fault-injecting software backend
// that has written one datagram from a SendBuffer of its own to its
// group g.
func sentFromSendBuffer(t *testing.T) (c *rdmanet.Conn, g *net.UDPAddr, sb *rdmanet.SendBuffer) {
	t.Helper()
	g = newGroup()
	c = listen(t, g, func(lc *rdmanet.ListenConfig) { lc.Backend = faults(t, &rdmanet.Faults{}) })
	sb, err := c.NewSendBuffer(4096)
	require.NoError(t, err)
	_, err = c.WriteTo(sb.Bytes()[:64], g)
	require.NoError(t, err)
	return c, g, sb
}

// removeDevice reports c's device removed and waits until c's calls
// fail (GroupAddr of g reaps no completion).
func removeDevice(t *testing.T, c *rdmanet.Conn, g *net.UDPAddr) {
	t.Helper()
	require.NoError(t, rdmanet.InjectFaultEvent(c, verbs.Event{Type: verbs.EventDeviceRemoval}))
	require.Eventually(t, func() bool {
		_, err := c.GroupAddr(g)
		return err != nil
	}, 5*time.Second, time.Millisecond, "waiting for the removal to fail calls")
}
