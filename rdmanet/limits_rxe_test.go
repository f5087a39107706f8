//go:build linux

package rdmanet_test

import (
	"context"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/testenv"
	"github.com/go-rdma/rdmanet/ipoib"
	"github.com/go-rdma/rdmanet/rdmanet"
)

// On rdma-core a device limits the QPs attached to one group
// (max_mcast_qp_attach: 56 on rxe): the conn past it fails with
// ErrGroupLimit, and the error names the limits and their values, the
// one it hit included.
func TestRDMACoreGroupLimitIsNamed(t *testing.T) {
	testenv.NeedDevice(t)
	g := newGroup()
	lc := testConfig()
	lc.RecvDepth, lc.SendDepth = 8, 4
	for i := 0; ; i++ {
		require.Less(t, i, 4096, "no limit met")
		c, err := lc.ListenMulticast(context.Background(), "rdma", nil, g)
		if err == nil {
			t.Cleanup(func() { c.Close() })
			continue
		}
		t.Logf("conn %d: %v", i, err)
		require.ErrorIs(t, err, rdmanet.ErrGroupLimit)
		m := regexp.MustCompile(`max_mcast_qp_attach (\d+) QPs in one group`).FindStringSubmatch(err.Error())
		require.NotNil(t, m, "the error names max_mcast_qp_attach: %v", err)
		limit, _ := strconv.Atoi(m[1])
		require.Equal(t, limit, i, "the conns that joined are the limit the error names")
		require.Regexp(t, `max_mcast_grp \d+ groups`, err.Error())
		break
	}
}

// On rdma-core too a unicast destination that cannot be reached fails
// when its address handle is made (ibv_create_ah resolves the route and
// neighbour on RoCE; rxe in the VM answers ETIMEDOUT after a second), with
// the errno, and is counted as SendErrHostUnreachable or
// SendErrNetUnreachable.
func TestRDMACoreUnreachableUnicast(t *testing.T) {
	testenv.NeedDevice(t)
	c := listen(t, newGroup())
	to := &rdmanet.Addr{GID: ipoib.GIDFromIP(netip.MustParseAddr("::ffff:10.0.0.1")), QPN: 0x1234}
	_, err := c.WriteTo([]byte("unreach"), to)
	t.Logf("the error: %v", err)
	var oe *net.OpError
	require.ErrorAs(t, err, &oe)
	var errno syscall.Errno
	require.ErrorAs(t, err, &errno)
	require.Contains(t, []syscall.Errno{syscall.ENETUNREACH, syscall.EHOSTUNREACH, syscall.ETIMEDOUT}, errno)
	st := c.Stats()
	require.Equal(t, uint64(1), st.SendErrors)
	want := rdmanet.SendErrHostUnreachable
	if errno == syscall.ENETUNREACH {
		want = rdmanet.SendErrNetUnreachable
	}
	require.Equal(t, map[string]uint64{want: 1}, st.SendFailed)
}
