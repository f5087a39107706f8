//go:build linux

package soft_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// The send CQ's channel has no fd and never has events to get.
func TestSendChannelHasNoEvents(t *testing.T) {
	e := newEndpoint(t, verbs.QPConfig{})
	ch := e.qp.SendCQ().Channel()
	require.Equal(t, -1, ch.Fd())
	n, err := ch.GetEvents()
	require.NoError(t, err)
	require.Zero(t, n)
}
