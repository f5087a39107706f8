//go:build linux

package soft

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// The send CQ: a ring of the completions PostSend leaves.

// sendCQ is the send CQ: a ring of completions. PostSend completes every
// WR before it returns, so the CQ has no channel fd: a completion queued
// while the CQ is armed leaves its waiter a note (wait.go).
type sendCQ struct {
	mu     sync.Mutex
	closed bool
	ring   []verbs.WC
	depth  int // completions the CQ holds (the ring grows to it)
	head   int
	n      int
	armed  bool
	waiter *sendWaiter
	// queued mirrors n, or is -1 once closed, set with c.mu held: every
	// write polls the CQ first (rdmanet's takePending), and selective
	// signaling leaves it empty almost always, which Poll sees without
	// the lock.
	queued atomic.Int32
}

var _ verbs.CQ = (*sendCQ)(nil)

func (c *sendCQ) init(depth int) {
	c.depth = depth
	c.ring = make([]verbs.WC, min(depth, sendCQRing))
}

// sendCQRing is the send CQ's first ring: selective signaling keeps few
// completions queued, and the ring grows when more come.
const sendCQRing = 16

// room is how many completions fit, none where error completions of
// unsignaled WRs have filled the CQ past its depth; PostSend holds the
// send queue lock, and only PostSend adds completions, so room only grows
// meanwhile.
func (c *sendCQ) room() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return max(c.depth-c.n, 0)
}

// push queues a completion; c.mu is held. A completion that finds the ring
// full grows it (up to the CQ's depth for signaled ones, which PostSend
// keeps room for; past it only for an unsignaled WR's error completion):
// a completion is never dropped.
func (c *sendCQ) push(wc verbs.WC) {
	if c.n == len(c.ring) {
		ring := make([]verbs.WC, 2*len(c.ring))
		for i := range c.n {
			ring[i] = c.ring[(c.head+i)%len(c.ring)]
		}
		c.ring, c.head = ring, 0
	}
	c.ring[wrap(c.head+c.n, len(c.ring))] = wc
	c.n++
	c.queued.Store(int32(c.n))
	if c.armed {
		c.armed = false
		if c.waiter != nil {
			c.waiter.w.notify()
		}
	}
}

// Poll takes queued send completions. An empty CQ that is not closed
// answers 0 without taking the lock.
func (c *sendCQ) Poll(wcs []verbs.WC) (int, error) {
	if c.queued.Load() == 0 {
		return 0, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, fmt.Errorf("soft: ibv_poll_cq: %w", verbs.ErrClosed)
	}
	k := min(len(wcs), c.n)
	for i := range k {
		wcs[i] = c.ring[c.head]
		c.head = wrap(c.head+1, len(c.ring))
	}
	c.n -= k
	c.queued.Store(int32(c.n))
	return k, nil
}

// ReqNotify arms the CQ: the next completion queued leaves the waiter a
// note.
func (c *sendCQ) ReqNotify() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("soft: ibv_req_notify_cq: %w", verbs.ErrClosed)
	}
	c.armed = true
	return nil
}

// Channel is the send CQ's completion channel, which has no fd (Fd is
// -1): the waiter learns of completions from the CQ itself.
func (c *sendCQ) Channel() verbs.Channel { return sendChannel{} }

type sendChannel struct{}

func (sendChannel) Fd() int                 { return -1 }
func (sendChannel) GetEvents() (int, error) { return 0, nil }
func (sendChannel) AckEvents(int)           {}
