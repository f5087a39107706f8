//go:build linux

package rdmanet

import (
	"time"

	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/poller"
	"github.com/go-rdma/rdmanet/internal/verbs"
)

// BackendStuckSends is a test backend: the software provider, except that
// send completions never arrive, so the send ring fills and writes block.
const BackendStuckSends = "test-stuck-sends"

// BackendStuckSendsRDMACore is BackendStuckSends over rdma-core: sends go
// to the device, but the conn never sees their completions, so the send
// ring fills and writes block (a real device completes them too fast to
// block a write on purpose).
const BackendStuckSendsRDMACore = "test-stuck-sends-rdma-core"

func init() {
	stuck := func(id verbs.ID) verbs.ID { return &stuckID{ID: id} }
	verbs.Register(testProvider{name: BackendStuckSends, base: verbs.Software, wrap: stuck})
	verbs.Register(testProvider{name: BackendStuckSendsRDMACore, base: verbs.RDMACore, wrap: stuck})
}

type stuckID struct {
	verbs.ID
	cq *stuckCQ
}

func (s *stuckID) CreateQP(cfg verbs.QPConfig) (verbs.QP, error) {
	qp, err := s.ID.CreateQP(cfg)
	if err != nil {
		return nil, err
	}
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	s.cq = &stuckCQ{efd: efd}
	return &stuckQP{QP: qp, cq: s.cq}, nil
}

func (s *stuckID) Close() error {
	err := s.ID.Close()
	if s.cq != nil {
		unix.Close(s.cq.efd)
		s.cq = nil
	}
	return err
}

type stuckQP struct {
	verbs.QP
	cq *stuckCQ
}

func (q *stuckQP) SendCQ() verbs.CQ { return q.cq }
func (q *stuckQP) PollPostSend(wcs []verbs.WC, wrs []verbs.SendWR) (int, int, error) {
	return verbs.PollThenPost(q, wcs, wrs) // through the stuck CQ
}

// stuckCQ never completes anything; its channel never fires.
type stuckCQ struct{ efd int }

func (c *stuckCQ) Poll([]verbs.WC) (int, error) { return 0, nil }
func (c *stuckCQ) ReqNotify() error             { return nil }
func (c *stuckCQ) Channel() verbs.Channel       { return c }
func (c *stuckCQ) Fd() int                      { return c.efd }
func (c *stuckCQ) GetEvents() (int, error)      { return 0, nil }
func (c *stuckCQ) AckEvents(int)                {}
func (c *stuckCQ) Arm() error                   { return nil }
func (c *stuckCQ) Drain() (int, error)          { return 0, nil }
func (c *stuckCQ) Unread() (bool, bool)         { return false, true }

// NewWaiter waits on the eventfd, which nothing writes.
func (c *stuckCQ) NewWaiter(time.Duration) (verbs.CQWaiter, error) {
	w, err := poller.New(c.efd, "rdmanet-stuck-cq", stuckSource{c}, 0)
	if err != nil {
		return nil, err
	}
	return stuckWaiter{w}, nil
}

type stuckSource struct{ *stuckCQ }

func (s stuckSource) Poll() (int, error) { return 0, nil }

type stuckWaiter struct{ *poller.Waiter }

func (w stuckWaiter) WaitPoll([]verbs.WC) (int, error) { return w.Wait() }
