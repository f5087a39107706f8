//go:build linux

package soft_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// TestMembershipHopLimit: a membership's AH says the hop limit the
// group's datagrams carry. A QP's multicast goes out with its socket's
// IP_MULTICAST_TTL, which it leaves at Linux's 1 (socket.go), and the
// receiver's GRH (the IPv4 header's TTL, byte 8 of its last 20) shows
// what came.
func TestMembershipHopLimit(t *testing.T) {
	rx := newEndpoint(t, verbs.QPConfig{})
	tx := newEndpoint(t, verbs.QPConfig{})
	rx.postRecvs(0, 1)
	const group = "239.201.9.1"
	full, _ := rx.join(group, false)
	m, ah := tx.join(group, true)
	assert.Equal(t, uint8(1), m.AH.HopLimit, "send-only membership's AH")
	assert.Equal(t, uint8(1), full.AH.HopLimit, "full membership's AH")

	tx.send(ah, m.RemoteQPN, []byte("hop limit"), 0, 0)
	wcs := rx.recv(1, 2*time.Second)
	require.Len(t, wcs, 1)
	require.Equal(t, verbs.WCSuccess, wcs[0].Status)
	grh := rx.buf(wcs[0])[:verbs.GRHSize]
	assert.Equal(t, m.AH.HopLimit, grh[20+8], "the TTL the datagram came with")
}
