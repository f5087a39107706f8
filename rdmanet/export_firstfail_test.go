//go:build linux

package rdmanet

import "github.com/go-rdma/rdmanet/internal/verbs"

// BackendFirstSendFails is a test backend: the software provider, except
// that the completion of the first send (work request 0) has an error
// status; every later one succeeds.
const BackendFirstSendFails = "test-first-send-fails"

func init() {
	verbs.Register(testProvider{name: BackendFirstSendFails, base: verbs.Software,
		wrap: wrapQPs(func(qp verbs.QP) verbs.QP { return firstFailQP{qp} })})
}

type firstFailQP struct{ verbs.QP }

func (q firstFailQP) SendCQ() verbs.CQ { return hookCQ{q.QP.SendCQ(), failFirst} }
func (q firstFailQP) PollPostSend(wcs []verbs.WC, wrs []verbs.SendWR) (int, int, error) {
	return verbs.PollThenPost(q, wcs, wrs) // through the hooked CQ
}

// failFirst gives work request 0's completion an error status and no
// errno.
func failFirst(wcs []verbs.WC) {
	for i := range wcs {
		if wcs[i].WRID == 0 {
			wcs[i].Status, wcs[i].Errno = verbs.WCFatalErr, 0
		}
	}
}
