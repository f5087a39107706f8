//go:build linux

package rdmanet

import "github.com/go-rdma/rdmanet/internal/verbs"

// BackendFailedCompletions is a test backend: the software provider,
// except that every send completion has an error status and no errno, as a
// device's error completion has on rdma-core.
const BackendFailedCompletions = "test-failed-completions"

func init() {
	verbs.Register(testProvider{name: BackendFailedCompletions, base: verbs.Software,
		wrap: wrapQPs(func(qp verbs.QP) verbs.QP { return failingQP{qp} })})
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
