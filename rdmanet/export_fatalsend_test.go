//go:build linux

package rdmanet

import (
	"sync/atomic"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// BackendFatalCompletions is a test backend: BackendFailedCompletions
// (every send completion has an error status), whose QP is moreover in
// the error state (Ready false) from the first failed completion polled
// until it is Reset, as a QP after a fatal completion on rdma-core.
const BackendFatalCompletions = "test-fatal-completions"

func init() {
	verbs.Register(testProvider{name: BackendFatalCompletions, base: verbs.Software,
		wrap: func(id verbs.ID) verbs.ID { return fatalID{id} }})
}

type fatalID struct{ verbs.ID }

func (f fatalID) CreateQP(cfg verbs.QPConfig) (verbs.QP, error) {
	qp, err := f.ID.CreateQP(cfg)
	if err != nil {
		return nil, err
	}
	return &fatalQP{QP: qp}, nil
}

type fatalQP struct {
	verbs.QP
	broken atomic.Bool
}

func (q *fatalQP) SendCQ() verbs.CQ {
	return hookCQ{q.QP.SendCQ(), func(wcs []verbs.WC) {
		fail(wcs)
		if len(wcs) > 0 {
			q.broken.Store(true)
		}
	}}
}
func (q *fatalQP) PollPostSend(wcs []verbs.WC, wrs []verbs.SendWR) (int, int, error) {
	return verbs.PollThenPost(q, wcs, wrs) // through the failing CQ
}
func (q *fatalQP) Ready() (bool, error) { return !q.broken.Load(), nil }
func (q *fatalQP) Reset() error {
	err := q.QP.Reset()
	if err == nil {
		q.broken.Store(false)
	}
	return err
}
