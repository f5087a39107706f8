//go:build linux

package rdmanet

import (
	"context"
	"sync"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// BackendQuietEvents is a test backend: the software provider, except that
// a Join reads a DEVICE_REMOVAL off the event channel and queues it for
// Next without leaving the fd readable, as rdma-core's Join does with
// events that are not its own.
const BackendQuietEvents = "test-quiet-events"

func init() {
	verbs.Register(testProvider{name: BackendQuietEvents, base: verbs.Software,
		wrap: func(id verbs.ID) verbs.ID { return &quietID{ID: id} }})
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
