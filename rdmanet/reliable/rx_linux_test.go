//go:build linux

package reliable

import (
	"testing"

	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/stretchr/testify/require"
)

// A datagram longer than the MTU comes from no sender of the group (each
// writes at most the MTU): the receive loop, which reads the underlying
// conn into MTU-sized buffers, gets it truncated and counts it
// malformed, unhandled. The underlying conn's receive slots hold a little
// more than the MTU (GRH plus MTU, rounded up to 64 bytes), so a forged
// datagram one byte over the MTU reaches it.
func TestLongerThanMTUIsMalformed(t *testing.T) {
	if testDevice != "" {
		t.Skip("software backend only: the datagram is forged from a 127/8 address on lo")
	}
	group := newGroup()
	r := listenT(t, group, Config{})
	mtu := r.Conn().MTU()
	require.Greater(t, (verbs.GRHSize+mtu+63)&^63-verbs.GRHSize, mtu, "room past the MTU in a receive slot")
	sp, err := newSpoofer()
	require.NoError(t, err)
	defer sp.close()
	a := &attacker{groupIP: [4]byte(group.IP.To4())}
	// A data datagram of a sender of ours, but one byte too long.
	d := dataDG(0x7a, 0, 0, 0, 1, make([]byte, mtu+1-headerLen))
	require.Len(t, d, mtu+1)
	require.NoError(t, a.forge(sp, [4]byte{127, 0, 0, 1}, 0x4711, d))
	waitStat(t, r, "malformed datagrams", func(s Stats) uint64 { return s.Malformed }, 1)
	require.Equal(t, uint64(1), r.Conn().Stats().Truncated, "truncated by the underlying conn")
	st := r.Stats()
	require.Equal(t, uint64(1), st.Malformed)
	require.Zero(t, st.MessagesReceived, "the datagram's message")
	require.Zero(t, r.rcv.readyLen(), "messages ready")
}
