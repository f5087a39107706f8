//go:build linux

package rdmanet

import (
	"time"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// BackendFailedCompletions is a test backend: the software provider,
// except that every send completion has an error status and no errno, as a
// device's error completion has on rdma-core.
const BackendFailedCompletions = "test-failed-completions"

func init() { verbs.Register(failingProvider{}) }

type failingProvider struct{ stuckProvider }

func (failingProvider) Name() string                   { return BackendFailedCompletions }
func (p failingProvider) Serves(verbs.BindConfig) bool { return false }
func (p failingProvider) Bind(cfg verbs.BindConfig) (verbs.ID, error) {
	id, err := p.soft().Bind(cfg)
	if err != nil {
		return nil, err
	}
	return failingID{id}, nil
}

type failingID struct{ verbs.ID }

func (f failingID) CreateQP(cfg verbs.QPConfig) (verbs.QP, error) {
	qp, err := f.ID.CreateQP(cfg)
	if err != nil {
		return nil, err
	}
	return failingQP{qp}, nil
}

type failingQP struct{ verbs.QP }

func (q failingQP) SendCQ() verbs.CQ { return failingCQ{q.QP.SendCQ()} }
func (q failingQP) PollPostSend(wcs []verbs.WC, wrs []verbs.SendWR) (int, int, error) {
	return verbs.PollThenPost(q, wcs, wrs) // through the failing CQ
}

type failingCQ struct{ verbs.CQ }

func (c failingCQ) Poll(wcs []verbs.WC) (int, error) {
	n, err := c.CQ.Poll(wcs)
	fail(wcs[:n])
	return n, err
}

func (c failingCQ) NewWaiter(spin time.Duration) (verbs.CQWaiter, error) {
	w, err := c.CQ.NewWaiter(spin)
	if err != nil {
		return nil, err
	}
	return failingWaiter{w}, nil
}

type failingWaiter struct{ verbs.CQWaiter }

func (w failingWaiter) WaitPoll(wcs []verbs.WC) (int, error) {
	n, err := w.CQWaiter.WaitPoll(wcs)
	fail(wcs[:n])
	return n, err
}

// fail gives completions an error status and no errno.
func fail(wcs []verbs.WC) {
	for i := range wcs {
		wcs[i].Status, wcs[i].Errno = verbs.WCFatalErr, 0
	}
}
