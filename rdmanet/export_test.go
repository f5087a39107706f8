//go:build linux

package rdmanet

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/poller"
	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/internal/verbs/soft"
)

// SetSendBufferInline says whether SendBuffer datagrams within the inline
// limit are posted inline (the default) or by their SGE.
func SetSendBufferInline(c *Conn, on bool) {
	c.wr.mu.Lock()
	c.wr.bufNoInline = !on
	c.wr.mu.Unlock()
}

// InjectEvent raises an asynchronous event on a software-backend conn's ID.
func InjectEvent(c *Conn, ev verbs.Event) error { return soft.InjectEvent(c.id, ev) }

// BackendStuckSends is a test backend: the software provider, except that
// send completions never arrive, so the send ring fills and writes block.
const BackendStuckSends = "test-stuck-sends"

func init() { verbs.Register(stuckProvider{}) }

type stuckProvider struct{}

func (stuckProvider) soft() verbs.Provider {
	p, err := verbs.Lookup(verbs.Software)
	if err != nil {
		panic(err)
	}
	return p
}
func (stuckProvider) Name() string                           { return BackendStuckSends }
func (p stuckProvider) Available() error                     { return p.soft().Available() }
func (p stuckProvider) Devices() ([]verbs.DeviceAttr, error) { return p.soft().Devices() }
func (p stuckProvider) Serves(cfg verbs.BindConfig) bool     { return false }
func (p stuckProvider) Bind(cfg verbs.BindConfig) (verbs.ID, error) {
	id, err := p.soft().Bind(cfg)
	if err != nil {
		return nil, err
	}
	return &stuckID{ID: id}, nil
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

// BackendQuietEvents is a test backend: the software provider, except that
// a Join reads a DEVICE_REMOVAL off the event channel and queues it for
// Next without leaving the fd readable, as rdma-core's Join does with
// events that are not its own.
const BackendQuietEvents = "test-quiet-events"

func init() { verbs.Register(quietProvider{}) }

type quietProvider struct{ stuckProvider }

func (quietProvider) Name() string                   { return BackendQuietEvents }
func (p quietProvider) Serves(verbs.BindConfig) bool { return false }
func (p quietProvider) Bind(cfg verbs.BindConfig) (verbs.ID, error) {
	id, err := p.soft().Bind(cfg)
	if err != nil {
		return nil, err
	}
	return &quietID{ID: id}, nil
}

type quietID struct {
	verbs.ID
	mu    sync.Mutex
	queue []verbs.Event
}

func (q *quietID) Join(ctx context.Context, g verbs.Group, opt verbs.JoinOptions) (verbs.Membership, error) {
	m, err := q.ID.Join(ctx, g, opt)
	q.mu.Lock()
	q.queue = append(q.queue, verbs.Event{Type: verbs.EventDeviceRemoval})
	q.mu.Unlock()
	return m, err
}

func (q *quietID) Events() verbs.EventChannel { return quietChannel{q} }

type quietChannel struct{ q *quietID }

func (c quietChannel) Fd() int { return c.q.ID.Events().Fd() }
func (c quietChannel) Next() (verbs.Event, bool, error) {
	if ev, ok := c.q.take(); ok {
		return ev, true, nil
	}
	return c.q.ID.Events().Next()
}

// take takes the first event of the queue that only Next shows.
func (q *quietID) take() (verbs.Event, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.queue) == 0 {
		return verbs.Event{}, false
	}
	ev := q.queue[0]
	q.queue = q.queue[1:]
	return ev, true
}

// NewWaiter wraps the software channel's waiter: the queued events show
// only when the waiter is woken (rdmanet's kick) or wakes anyway.
func (c quietChannel) NewWaiter() (verbs.EventWaiter, error) {
	w, err := c.q.ID.Events().NewWaiter()
	if err != nil {
		return nil, err
	}
	return quietWaiter{EventWaiter: w, q: c.q}, nil
}

type quietWaiter struct {
	verbs.EventWaiter
	q *quietID
}

func (w quietWaiter) WaitPoll(evs []verbs.Event) (int, error) {
	n := 0
	for ; n < len(evs); n++ {
		ev, ok := w.q.take()
		if !ok {
			break
		}
		evs[n] = ev
	}
	if n > 0 {
		return n, nil
	}
	n, err := w.EventWaiter.WaitPoll(evs)
	if n > 0 || err != nil {
		return n, err
	}
	if ev, ok := w.q.take(); ok { // woken: what the kick was for
		evs[0] = ev
		return 1, nil
	}
	return 0, nil
}

// DropCountKeys returns the keys of the drop counters of c's QP (all of
// them, zero or not), and whether it counts drops at all.
func DropCountKeys(c *Conn) ([]string, bool) {
	var keys []string
	for k := range c.qp.DropCounts() {
		keys = append(keys, k)
	}
	return keys, keys != nil
}
