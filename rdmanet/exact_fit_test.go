//go:build linux

package rdmanet_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// A buffer exactly the datagram's length holds it whole: not truncated,
// and Stats().Truncated does not count it (ReadFrom and ReadBatch).
func TestExactFitBufferIsNotTruncated(t *testing.T) {
	t.Parallel()
	g := newGroup()
	c := listen(t, g)
	const msg = "0123456789"
	_, err := c.WriteTo([]byte(msg), g)
	require.NoError(t, err)
	buf := make([]byte, len(msg))
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	n, _, err := c.ReadFrom(buf)
	require.NoError(t, err)
	require.Equal(t, msg, string(buf[:n]))

	_, err = c.WriteTo([]byte(msg), g)
	require.NoError(t, err)
	ms := []rdmanet.Message{{Buffer: make([]byte, len(msg))}}
	k, err := c.ReadBatch(ms)
	require.NoError(t, err)
	require.Equal(t, 1, k)
	require.False(t, ms[0].Truncated, "an exact fit marked truncated")
	require.Equal(t, msg, string(ms[0].Buffer[:ms[0].N]))
	require.Zero(t, c.Stats().Truncated, "exact fits counted as truncated")
}
