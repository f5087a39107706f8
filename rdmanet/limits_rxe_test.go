package rdmanet_test

import (
	"context"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// On rdma-core a device limits the QPs attached to one group
// (max_mcast_qp_attach: 56 on rxe): the conn past it fails with
// ErrGroupLimit, and the error names the limits and their values, the
// one it hit included.
func TestRDMACoreGroupLimitIsNamed(t *testing.T) {
	needDevice(t)
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
