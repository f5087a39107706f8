//go:build linux

package rdmanet

import "github.com/go-rdma/rdmanet/internal/verbs"

// BackendFailedCompletions is a test backend: the software provider,
// except that every send completion has an error status and no errno, as a
// device's error completion has on rdma-core.
const BackendFailedCompletions = "test-failed-completions"

func init() {
	verbs.Register(testProvider{name: BackendFailedCompletions, base: verbs.Software,
		wrap: func(id verbs.ID) verbs.ID { return failingID{id} }})
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

func (q failingQP) SendCQ() verbs.CQ { return hookCQ{q.QP.SendCQ(), fail} }
func (q failingQP) PollPostSend(wcs []verbs.WC, wrs []verbs.SendWR) (int, int, error) {
	return verbs.PollThenPost(q, wcs, wrs) // through the failing CQ
}

// fail gives completions an error status and no errno.
func fail(wcs []verbs.WC) {
	for i := range wcs {
		wcs[i].Status, wcs[i].Errno = verbs.WCFatalErr, 0
	}
}
