package soft_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

func TestMulticastTwoReceivers(t *testing.T) {
	a := newEndpoint(t, verbs.QPConfig{})
	b := newEndpoint(t, verbs.QPConfig{})
	c := newEndpoint(t, verbs.QPConfig{})
	s := newEndpoint(t, verbs.QPConfig{})
	for _, e := range []*endpoint{a, b, c} {
		e.postRecvs(0, 8)
	}
	a.join("239.1.2.3", false)
	b.join("239.1.2.3", false)
	c.join("239.1.2.4", false)
	m, ah := s.join("239.1.2.3", true)
	assert.True(t, m.SendOnly)
	assert.Equal(t, verbs.MulticastQPN, m.RemoteQPN)
	assert.Equal(t, "::ffff:239.1.2.3", m.MGID.String())

	msg := []byte("hello, group")
	s.send(ah, m.RemoteQPN, msg, 0, 0)
	for _, e := range []*endpoint{a, b} {
		wcs := e.recv(1, 2*time.Second)
		require.Len(t, wcs, 1)
		wc := wcs[0]
		assert.Equal(t, verbs.WCSuccess, wc.Status)
		assert.Equal(t, verbs.WCRecv, wc.Opcode)
		assert.Equal(t, verbs.WCGRH, wc.Flags)
		assert.Equal(t, uint32(verbs.GRHSize+len(msg)), wc.ByteLen)
		assert.Equal(t, s.qp.QPN(), wc.SrcQP)
		assert.Equal(t, e.qp.QPN(), wc.QPN)
		assert.Equal(t, msg, e.buf(wc)[verbs.GRHSize:])
	}
	assert.Empty(t, c.recv(1, 50*time.Millisecond), "QP on another group got a message")
}
