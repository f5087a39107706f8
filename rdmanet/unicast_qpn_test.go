//go:build linux

package rdmanet_test

import (
	"errors"
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/ipoib"
	"github.com/go-rdma/rdmanet/rdmanet"
)

// A unicast destination's QPN is below 0xFFFFFF, the multicast QPN: a
// unicast GID with QPN 0xFFFFFF is refused as the error says, 0xFFFFFE
// is sent to.
func TestUnicastQPNBelowMulticastQPN(t *testing.T) {
	t.Parallel()
	if testDevice != "" {
		t.Skip("a peer on 127.0.0.0/8")
	}
	c := listen(t, newGroup())
	var g ipoib.GID
	copy(g[:], net.IPv4(127, 2, 0, 1).To16())
	_, err := c.WriteTo([]byte("x"), &rdmanet.Addr{GID: g, QPN: 0xFFFFFF})
	require.ErrorContains(t, err, "not a unicast UD address")
	for try := 0; ; try++ {
		_, err = c.WriteTo([]byte("x"), &rdmanet.Addr{GID: g, QPN: 0xFFFFFE})
		if err == nil || !errors.Is(err, rdmanet.ErrEarlierSendFailed) || try == 3 {
			break
		}
	}
	require.NoError(t, err, "QPN 0xFFFFFE")
}

// QPN 0 is no UD QP's (QP0 is the subnet management QP, not reachable
// by a UD send): a unicast GID with QPN 0 is refused as not a unicast
// UD address, by WriteTo and by WriteBatch, before any address handle
// is made or anything is posted.
func TestUnicastQPNZeroRefused(t *testing.T) {
	t.Parallel()
	if testDevice != "" {
		t.Skip("a peer on 127.0.0.0/8")
	}
	c := listen(t, newGroup())
	var g ipoib.GID
	copy(g[:], net.IPv4(127, 2, 0, 2).To16())
	to := &rdmanet.Addr{GID: g, QPN: 0}
	_, err := c.WriteTo([]byte("x"), to)
	require.ErrorContains(t, err, "not a unicast UD address")
	n, err := c.WriteBatch([]rdmanet.Message{{Buffer: []byte("x"), Addr: *to}})
	require.ErrorContains(t, err, "not a unicast UD address")
	require.Equal(t, 0, n)
	require.Zero(t, c.SendsPosted(), "sends posted to QPN 0")
}
