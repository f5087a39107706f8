//go:build linux

package soft

import (
	"errors"
	"fmt"
	"time"

	"github.com/go-rdma/rdmanet/internal/poller"
	"github.com/go-rdma/rdmanet/internal/verbs"
)

// The CQs' waiters: a poller.Waiter each, in the netpoller. What the
// software backend does to wake a reader cheaply stays here and in
// recvepoll.go; the consumer sees WaitPoll.

// sendWaiter waits for the send CQ. PostSend completes every WR before
// it returns, so the CQ needs no fd: the waiter polls, arms the CQ and
// polls again, then sleeps on a note that a completion queued while
// armed, SetDeadline, Wake and Close leave (with the rdmanet datapath
// nothing else posts meanwhile, so it sleeps only until its deadline,
// Wake or Close). A spin window buys nothing here and is ignored.
type sendWaiter struct {
	c   *sendCQ
	w   noteWaiter
	wcs []verbs.WC
}

// NewWaiter returns the send CQ's waiter.
func (c *sendCQ) NewWaiter(time.Duration) (verbs.CQWaiter, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, fmt.Errorf("soft: send CQ waiter: %w", verbs.ErrClosed)
	}
	if c.waiter != nil {
		return nil, errors.New("soft: the send CQ has a waiter already")
	}
	sw := &sendWaiter{c: c}
	sw.w.init(sw.poll, sw.arm)
	c.waiter = sw
	return sw, nil
}

func (w *sendWaiter) WaitPoll(wcs []verbs.WC) (int, error) {
	w.wcs = wcs
	n, err := w.w.wait()
	w.wcs = nil
	return n, err
}

func (w *sendWaiter) SetDeadline(t time.Time) error { w.w.setDeadline(t); return nil }
func (w *sendWaiter) Wake()                         { w.w.wake() }
func (w *sendWaiter) Close() error                  { w.w.close(); return nil }

func (w *sendWaiter) poll() (int, error) { return w.c.Poll(w.wcs) }
func (w *sendWaiter) arm() error         { return w.c.ReqNotify() }

// eventWaiter waits for an ID's events, which the provider raises in Go
// (InjectEvent): a noteWaiter, no fd, whose polls collect with Next.
type eventWaiter struct {
	c   *eventChannel
	w   noteWaiter
	col verbs.EventCollector
}

// NewWaiter returns the event channel's waiter.
func (c *eventChannel) NewWaiter() (verbs.EventWaiter, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, fmt.Errorf("soft: event channel waiter: %w", verbs.ErrClosed)
	}
	if c.waiter != nil {
		return nil, errors.New("soft: the event channel has a waiter already")
	}
	ew := &eventWaiter{c: c}
	ew.col.Init(c.Next)
	ew.w.init(ew.col.Poll, ew.arm)
	c.waiter = ew
	return ew, nil
}

func (w *eventWaiter) WaitPoll(evs []verbs.Event) (int, error) {
	return w.col.WaitPoll(evs, w.w.wait)
}

func (w *eventWaiter) Wake()        { w.w.wake() }
func (w *eventWaiter) Close() error { w.w.close(); return nil }

func (w *eventWaiter) arm() error { return w.c.arm() }

// recvWaiter waits for the receive CQ, whose readiness is its sockets':
// level-triggered (Poll reads until it finds a completion or both sockets
// are dry, so after a Poll that found nothing they are quiet, and the
// wait sleeps at once: nothing to arm or drain). Before each sleep it asks
// the CQ whether to sleep on the multicast socket alone (narrow: the
// netpoller wakes it without a nested epoll) or on the epoll set over both
// sockets (wide); while it sleeps narrow the CQ kicks it for what that fd
// cannot show (a unicast datagram, receives posted into an empty queue).
// When a sleep ends because the fd became readable, the next Poll reads
// at once rather than ask epoll first (woken).
type recvWaiter struct {
	c   *recvCQ
	w   *poller.Waiter
	wcs []verbs.WC
	// woken: the fd just woke the wait. Only the wait touches it (its
	// caller serializes waits), so it needs no atomic.
	woken bool
}

// NewWaiter returns the receive CQ's waiter, which takes over the epoll
// set and (as its narrow fd) the multicast socket: they go into the
// netpoller as they are, no dups, and the QP's destroy closes them
// through the waiter.
func (c *recvCQ) NewWaiter(spin time.Duration) (verbs.CQWaiter, error) {
	c.mu.Lock()
	if c.closed || c.waiter != nil {
		c.mu.Unlock()
		if c.closed {
			return nil, fmt.Errorf("soft: receive CQ waiter: %w", verbs.ErrClosed)
		}
		return nil, errors.New("soft: the receive CQ has a waiter already")
	}
	rw := &recvWaiter{c: c}
	w, err := poller.Adopt(c.wideFd, "rdmanet-soft-recv-cq", rw, spin)
	if err != nil {
		c.mu.Unlock()
		return nil, err
	}
	rw.w, c.waiter = w, rw
	w.SetLevelTriggered(true)
	err = w.AdoptNarrow(c.q.mcFd, rw)
	c.mu.Unlock()
	if err == nil {
		err = c.setKick(w.Kick)
	}
	if err != nil {
		w.Stop() // the QP's destroy closes the fds
		return nil, err
	}
	return rw, nil
}

func (w *recvWaiter) WaitPoll(wcs []verbs.WC) (int, error) {
	w.wcs = wcs
	n, err := w.w.Wait()
	w.wcs = nil
	return n, err
}

func (w *recvWaiter) SetDeadline(t time.Time) error { return w.w.SetDeadline(t) }
func (w *recvWaiter) Wake()                         { w.w.Wake() }

// Close stops the kicks and unblocks the wait; the fds stay until the
// QP's destroy.
func (w *recvWaiter) Close() error {
	w.c.setKick(nil)
	w.w.Stop()
	return nil
}

// Poll, Arm and Drain are the poller.Source; Narrow its poller.Narrower;
// Woken the poller's news that the fd woke the wait.
func (w *recvWaiter) Poll() (int, error) {
	woken := w.woken
	w.woken = false
	return w.c.poll(w.wcs, woken)
}
func (w *recvWaiter) Arm() error          { return nil }
func (w *recvWaiter) Drain() (int, error) { return 0, nil }
func (w *recvWaiter) Narrow() bool        { return w.c.sleepNarrow() }
func (w *recvWaiter) Woken()              { w.woken = true }
