//go:build linux

package reliable

import (
	"testing"
	"time"

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
	forgesOnLo(t)
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

// The same datagram, one byte past the MTU, read by a reader that holds
// the underlying conn itself (readDatagram: ReadFromAddr does not say it
// cut one) is dropped and counted too, not handed out cut to the MTU;
// the next message comes as written.
func TestLongerThanMTUIsMalformedInline(t *testing.T) {
	forgesOnLo(t)
	group := newGroup()
	r := listenT(t, group, Config{})
	mtu := r.Conn().MTU()
	raw := rawConn(t, group)
	type read struct {
		msg string
		err error
	}
	done := make(chan read, 1)
	go func() {
		b := make([]byte, mtu)
		n, _, err := r.ReadFrom(b)
		done <- read{string(b[:n]), err}
	}()
	handOverToReader(t, r, raw, group)

	sp, err := newSpoofer()
	require.NoError(t, err)
	defer sp.close()
	a := &attacker{groupIP: [4]byte(group.IP.To4())}
	d := dataDG(0x7b, 0, 0, 0, 1, make([]byte, mtu+1-headerLen))
	require.NoError(t, a.forge(sp, [4]byte{127, 0, 0, 1}, 0x4712, d))
	waitStat(t, r, "malformed datagrams", func(s Stats) uint64 { return s.Malformed }, 2)

	tx := listenT(t, group, Config{})
	_, err = tx.WriteTo([]byte("after"), group)
	require.NoError(t, err)
	select {
	case got := <-done:
		require.NoError(t, got.err)
		require.Equal(t, "after", got.msg, "the message read after the datagram too long")
	case <-time.After(10 * time.Second):
		t.Fatal("no message read in 10 s")
	}
	require.Equal(t, uint64(2), r.Stats().Malformed, "the foreign datagram and the one too long")
}
