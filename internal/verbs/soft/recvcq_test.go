//go:build linux

package soft_test

import (
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// A receive buffer of exactly the GRH's 40 bytes may be posted (one of 39
// may not: TestMessageSizeAndBadSGE), and takes a datagram with no
// payload: the GRH alone.
func TestRecvBufferOfGRHOnly(t *testing.T) {
	a, b := newEndpoint(t, verbs.QPConfig{}), newEndpoint(t, verbs.QPConfig{})
	n, err := b.qp.PostRecv([]verbs.RecvWR{{WRID: 0, SGE: verbs.SGE{Offset: 0, Length: verbs.GRHSize, LKey: b.mr.LKey()}}})
	require.NoError(t, err, "a receive buffer of the GRH alone")
	require.Equal(t, 1, n)
	wc := a.unicastTo(b, nil)
	require.Equal(t, verbs.WCSuccess, wc.Status)
	assert.Equal(t, uint32(verbs.GRHSize), wc.ByteLen)
	assert.Equal(t, a.qp.QPN(), wc.SrcQP)
	assert.Equal(t, a.id.Local().IP.To4(), net.IP(b.buf(wc)[32:36]), "GRH source")
}
