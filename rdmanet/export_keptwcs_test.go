//go:build linux

package rdmanet

import (
	"sync"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// BackendKeptCompletions is a test backend: the software provider, whose
// QP reset keeps the receive completions that were waiting (the
// datagrams already in its sockets, polled just before the reset), to be
// polled after it, as a device's CQ may still hold completions from
// before a reset. (The software QP's reset drops its posted receives, so
// its own CQ holds none after one.) Only Poll returns them, not a
// waiter's WaitPoll: reclaimRecvs is what must take them.
const BackendKeptCompletions = "test-kept-completions"

func init() {
	verbs.Register(testProvider{name: BackendKeptCompletions, base: verbs.Software,
		wrap: wrapQPs(func(qp verbs.QP) verbs.QP { return &keptQP{QP: qp} })})
}

type keptQP struct {
	verbs.QP
	mu      sync.Mutex
	kept    []verbs.WC
	atReset int
}

func (q *keptQP) Reset() error {
	wcs := make([]verbs.WC, 64)
	q.mu.Lock()
	for {
		n, err := q.QP.RecvCQ().Poll(wcs)
		q.kept = append(q.kept, wcs[:n]...)
		if n == 0 || err != nil {
			break
		}
	}
	q.atReset = len(q.kept)
	q.mu.Unlock()
	return q.QP.Reset()
}

func (q *keptQP) RecvCQ() verbs.CQ { return keptCQ{q.QP.RecvCQ(), q} }

type keptCQ struct {
	verbs.CQ
	q *keptQP
}

func (c keptCQ) Poll(wcs []verbs.WC) (int, error) {
	q := c.q
	q.mu.Lock()
	if len(q.kept) > 0 {
		n := copy(wcs, q.kept)
		q.kept = q.kept[n:]
		q.mu.Unlock()
		return n, nil
	}
	q.mu.Unlock()
	return c.CQ.Poll(wcs)
}

// KeptCompletions returns how many receive completions c's QP kept at
// its last reset and how many of them are not polled yet; c is a
// BackendKeptCompletions conn.
func KeptCompletions(c *Conn) (atReset, left int) {
	q := c.qp.(*keptQP)
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.atReset, len(q.kept)
}
