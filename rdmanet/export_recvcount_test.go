//go:build linux

package rdmanet

import (
	"sync/atomic"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// BackendCountingRecvs is a test backend: the software provider, with a
// count of the receives its QP holds posted (posted by PostRecv, not yet
// completed by a poll of the receive CQ), read by PostedRecvs.
const BackendCountingRecvs = "test-counting-recvs"

func init() {
	verbs.Register(testProvider{name: BackendCountingRecvs, base: verbs.Software,
		wrap: wrapQPs(func(qp verbs.QP) verbs.QP { return &countingQP{QP: qp} })})
}

type countingQP struct {
	verbs.QP
	posted atomic.Int64
}

func (q *countingQP) PostRecv(wrs []verbs.RecvWR) (int, error) {
	n, err := q.QP.PostRecv(wrs)
	q.posted.Add(int64(n))
	return n, err
}

func (q *countingQP) RecvCQ() verbs.CQ {
	return hookCQ{q.QP.RecvCQ(), func(wcs []verbs.WC) { q.posted.Add(-int64(len(wcs))) }}
}

// PostedRecvs returns how many receives c's QP holds posted; c is a
// BackendCountingRecvs conn.
func PostedRecvs(c *Conn) int { return int(c.qp.(*countingQP).posted.Load()) }
