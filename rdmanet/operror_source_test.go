//go:build linux

package rdmanet_test

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A read's error is a *net.OpError whose Source is the conn's local
// address, as net.UDPConn's is.
func TestOpErrorNamesSource(t *testing.T) {
	t.Parallel()
	// listen: the test's backend (rxe in the VM, where the software
	// backend cannot bind UDP 4791 beside it).
	c := listen(t, newGroup())
	require.NoError(t, c.SetReadDeadline(time.Now().Add(-time.Second)))
	_, _, err := c.ReadFrom(make([]byte, 64))
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	var oe *net.OpError
	require.True(t, errors.As(err, &oe), "got %T, want *net.OpError", err)
	require.NotNil(t, oe.Source, "OpError.Source")
	require.Equal(t, c.LocalAddr().String(), oe.Source.String())
}
