//go:build linux

package rdmanet

import (
	"sync/atomic"
	"time"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// BackendCountingRecvs is a test backend: the software provider, with a
// count of the receives its QP holds posted (posted by PostRecv, not yet
// completed by a poll of the receive CQ), read by PostedRecvs.
const BackendCountingRecvs = "test-counting-recvs"

func init() { verbs.Register(countingProvider{}) }

type countingProvider struct{ stuckProvider }

func (countingProvider) Name() string                   { return BackendCountingRecvs }
func (p countingProvider) Serves(verbs.BindConfig) bool { return false }
func (p countingProvider) Bind(cfg verbs.BindConfig) (verbs.ID, error) {
	id, err := p.soft().Bind(cfg)
	if err != nil {
		return nil, err
	}
	return countingID{id}, nil
}

type countingID struct{ verbs.ID }

func (c countingID) CreateQP(cfg verbs.QPConfig) (verbs.QP, error) {
	qp, err := c.ID.CreateQP(cfg)
	if err != nil {
		return nil, err
	}
	return &countingQP{QP: qp}, nil
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

func (q *countingQP) RecvCQ() verbs.CQ { return countingCQ{q.QP.RecvCQ(), q} }

type countingCQ struct {
	verbs.CQ
	q *countingQP
}

func (c countingCQ) Poll(wcs []verbs.WC) (int, error) {
	n, err := c.CQ.Poll(wcs)
	c.q.posted.Add(-int64(n))
	return n, err
}

func (c countingCQ) NewWaiter(spin time.Duration) (verbs.CQWaiter, error) {
	w, err := c.CQ.NewWaiter(spin)
	if err != nil {
		return nil, err
	}
	return countingWaiter{w, c.q}, nil
}

type countingWaiter struct {
	verbs.CQWaiter
	q *countingQP
}

func (w countingWaiter) WaitPoll(wcs []verbs.WC) (int, error) {
	n, err := w.CQWaiter.WaitPoll(wcs)
	w.q.posted.Add(-int64(n))
	return n, err
}

// PostedRecvs returns how many receives c's QP holds posted; c is a
// BackendCountingRecvs conn.
func PostedRecvs(c *Conn) int { return int(c.qp.(*countingQP).posted.Load()) }
