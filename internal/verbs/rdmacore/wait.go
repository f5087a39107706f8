//go:build linux && cgo

package rdmacore

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/poller"
	"github.com/go-rdma/rdmanet/internal/verbs"
)

// cqWaiter is a CQ's wait-poll: a poller.Waiter on a dup of the completion
// channel's fd, running the channel protocol of libibverbs. A wait polls;
// finding nothing it arms the CQ (ibv_req_notify_cq) and polls once more,
// then sleeps in the netpoller (the channel is dry: see internal/poller's
// doc and cq.owed); woken, it reads the event and polls.
// Events are acknowledged through the channel's AckEvents, which passes
// them to ibv_ack_cq_events in batches of ackBatch, and the CQ's destroy
// acks the rest: each event is acknowledged once, here.
type cqWaiter struct {
	c   *cq
	w   *poller.Waiter
	wcs []verbs.WC // the WaitPoll in progress polls into these
}

var _ verbs.CQWaiter = (*cqWaiter)(nil)

// NewWaiter returns the CQ's waiter.
func (c *cq) NewWaiter(spin time.Duration) (verbs.CQWaiter, error) {
	if err := c.d.check("ibv_req_notify_cq"); err != nil {
		return nil, err
	}
	cw := &cqWaiter{c: c}
	w, err := poller.New(c.fd, "rdmanet-cq", cw, spin)
	if err != nil {
		return nil, err
	}
	cw.w = w
	return cw, nil
}

// WaitPoll implements verbs.CQWaiter.
func (w *cqWaiter) WaitPoll(wcs []verbs.WC) (int, error) {
	w.wcs = wcs
	n, err := w.w.Wait()
	w.wcs = nil
	return n, err
}

func (w *cqWaiter) SetDeadline(t time.Time) error { return w.w.SetDeadline(t) }
func (w *cqWaiter) Wake()                         { w.w.Wake() }
func (w *cqWaiter) Close() error                  { return w.w.Close() }

// Poll, Arm and Drain are the poller.Source of the wait.
func (w *cqWaiter) Poll() (int, error) { return w.c.Poll(w.wcs) }
func (w *cqWaiter) Arm() error         { return w.c.ReqNotify() }

// Drain reads the channel in one crossing (rn_get_cq_events loops until
// EAGAIN or until it read the events cq.owed says may be there, none
// when nothing is owed; until EAGAIN in the waiter's eager pattern) and
// acknowledges what it read.
func (w *cqWaiter) Drain() (int, error) {
	ch := (*compChannel)(w.c)
	n, err := ch.getEvents(w.w.EagerDrain())
	ch.AckEvents(n)
	return n, err
}

// cmWait is how Join waits for the rdma_cm event channel: a dup of its fd
// in the netpoller, so a goroutine waiting for MULTICAST_JOIN holds no OS
// thread (as unix.Poll would).
type cmWait struct {
	f  *os.File
	rc syscall.RawConn
}

func newCMWait(fd int) (*cmWait, error) {
	nfd, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, os.NewSyscallError("fcntl F_DUPFD_CLOEXEC", err)
	}
	// The channel's fd is non-blocking (the dup shares that), so the
	// file goes into the netpoller.
	f := os.NewFile(uintptr(nfd), "rdmanet-cm-join")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("rdmacore: event channel wait: %w", err)
	}
	return &cmWait{f: f, rc: rc}, nil
}

// wait returns once the channel is readable or d has passed (nil either
// way: the caller looks again).
func (w *cmWait) wait(d time.Duration) error {
	if err := w.f.SetReadDeadline(time.Now().Add(d)); err != nil {
		return err
	}
	err := w.rc.Read(func(fd uintptr) bool {
		pfd := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(pfd[:], 0)
		return n > 0 || (err != nil && err != unix.EINTR)
	})
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil
	}
	return err
}

func (w *cmWait) close() { w.f.Close() }

// eventWaiter is an ID's event wait-poll: a poller.Waiter on a dup of the
// ID's event set (Events().Fd(): the cm event channel, the device's async
// fd and the ID's wake-up eventfd), which is readable while Next may
// have something; there is nothing to arm or drain.
type eventWaiter struct {
	verbs.EventCollector // Poll collects events with Next
	w                    *poller.Waiter
}

var _ verbs.EventWaiter = (*eventWaiter)(nil)

// NewWaiter returns the event channel's waiter.
func (c *eventChannel) NewWaiter() (verbs.EventWaiter, error) {
	ew := &eventWaiter{}
	ew.Init(c.Next)
	w, err := poller.New(c.epfd, "rdmanet-events", ew, 0)
	if err != nil {
		return nil, err
	}
	ew.w = w
	return ew, nil
}

// WaitPoll implements verbs.EventWaiter.
func (w *eventWaiter) WaitPoll(evs []verbs.Event) (int, error) {
	return w.EventCollector.WaitPoll(evs, w.w.Wait)
}

func (w *eventWaiter) Wake()        { w.w.Wake() }
func (w *eventWaiter) Close() error { return w.w.Close() }

// Poll (verbs.EventCollector's), Arm and Drain are the poller.Source of
// the wait.
func (w *eventWaiter) Arm() error          { return nil }
func (w *eventWaiter) Drain() (int, error) { return 0, nil }
