//go:build linux

package rdmanet

import (
	"sync/atomic"

	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/internal/verbs/soft"
)

// BackendCountingAHs is a test backend: the software provider, whose QP
// counts the address handles it made and those still open, read by
// AHCounts.
const BackendCountingAHs = "test-counting-ahs"

func init() {
	verbs.Register(testProvider{name: BackendCountingAHs, base: verbs.Software,
		wrap: wrapQPs(func(qp verbs.QP) verbs.QP { return &ahCountingQP{QP: qp} })})
}

type ahCountingQP struct {
	verbs.QP
	made, open atomic.Int64
}

func (q *ahCountingQP) CreateAH(attr verbs.AHAttr) (verbs.AH, error) {
	ah, err := q.QP.CreateAH(attr)
	if err != nil {
		return nil, err
	}
	q.made.Add(1)
	q.open.Add(1)
	return &countedAH{AH: ah, qp: q}, nil
}

// PostSend posts wrs with the provider's own AHs in them, as it checks
// (a test's copy: this backend is not for the cost of a post).
func (q *ahCountingQP) PostSend(wrs []verbs.SendWR) (int, error) {
	own := make([]verbs.SendWR, len(wrs))
	copy(own, wrs)
	for i := range own {
		if a, ok := own[i].AH.(*countedAH); ok {
			own[i].AH = a.AH
		}
	}
	return q.QP.PostSend(own)
}

func (q *ahCountingQP) PollPostSend(wcs []verbs.WC, wrs []verbs.SendWR) (int, int, error) {
	return verbs.PollThenPost(q, wcs, wrs) // through PostSend above
}

type countedAH struct {
	verbs.AH
	qp     *ahCountingQP
	closed atomic.Bool
}

func (a *countedAH) Close() error {
	if a.closed.CompareAndSwap(false, true) {
		a.qp.open.Add(-1)
	}
	return a.AH.Close()
}

// AHCounts returns how many address handles c's QP made and how many of
// them are open; c uses BackendCountingAHs.
func AHCounts(c *Conn) (made, open int64) {
	q := c.qp.(*ahCountingQP)
	return q.made.Load(), q.open.Load()
}

// InjectQPError puts the software QP under c's test backend wrapping in
// the error state and reports QP_FATAL, as InjectEvent does for a
// software conn.
func InjectQPError(c *Conn) error {
	return soft.InjectEvent(c.id.(qpWrapID).ID, verbs.Event{Type: verbs.EventQPError})
}
