//go:build linux && cgo

package rdmacore

/*
#cgo noescape rn_poll
#cgo nocallback rn_poll
#cgo nocallback rn_req_notify
#cgo noescape rn_get_cq_events
#cgo nocallback rn_get_cq_events
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// ackBatch is how many events AckEvents gathers for one
// ibv_ack_cq_events, which takes a mutex.
const ackBatch = 32

// cq is a completion queue with its own completion channel.
type cq struct {
	d  *id
	cq *C.struct_rn_ibv_cq
	ch *C.struct_rn_ibv_comp_channel
	fd int

	evMu    sync.Mutex
	got     uint64 // events read by GetEvents
	acked   uint64 // events acked with ibv_ack_cq_events
	pending uint32 // AckEvents not yet passed on
	// owed bounds the events the channel may hold unread or still
	// raise: each arm (ibv_req_notify_cq) raises at most one event, so
	// an arm adds one and an event read takes one. A read that says
	// EAGAIN does not clear it: the arm's event may come later (rxe
	// shows the completion before it queues the event). GetEvents reads
	// at most owed events and none when it is 0: the read(2) that would
	// only say EAGAIN is saved, one per wake-up. This CQ is the only one
	// on its channel (newCQ); its waiter arms only after reading the
	// previous arm's event (internal/poller), so owed stays 0 or 1.
	owed atomic.Int64
	// sendErr is the QP's flag a failed send completion sets (the send
	// CQ's; nil for the receive CQ).
	sendErr *atomic.Bool
}

var (
	_ verbs.CQ      = (*cq)(nil)
	_ verbs.Channel = (*compChannel)(nil)
)

func newCQ(ctx *C.struct_rn_ibv_context, depth int, d *id) (*cq, error) {
	var e C.int
	c := &cq{d: d}
	if c.ch = C.rn_create_comp_channel(ctx, &e); c.ch == nil {
		return nil, fmt.Errorf("ibv_create_comp_channel: %w", unix.Errno(e))
	}
	c.fd = int(c.ch.fd)
	if err := unix.SetNonblock(c.fd, true); err != nil {
		C.rn_destroy_comp_channel(c.ch)
		return nil, fmt.Errorf("rdmacore: set completion channel non-blocking: %w", err)
	}
	if c.cq = C.rn_create_cq(ctx, C.int(depth), c.ch, &e); c.cq == nil {
		C.rn_destroy_comp_channel(c.ch)
		return nil, fmt.Errorf("ibv_create_cq %d entries: %w", depth, unix.Errno(e))
	}
	return c, nil
}

func (c *cq) destroy() error {
	var errs []error
	if c.cq != nil {
		c.evMu.Lock()
		if n := c.got - c.acked; n > 0 {
			crossings.Add(1)
			C.rn_ack_cq_events(c.cq, C.uint(n))
			c.acked = c.got
		}
		c.pending = 0
		c.evMu.Unlock()
		if e := C.rn_destroy_cq(c.cq); e != 0 {
			errs = append(errs, fmt.Errorf("ibv_destroy_cq: %w", unix.Errno(e)))
		}
		c.cq = nil
	}
	if c.ch != nil {
		if e := C.rn_destroy_comp_channel(c.ch); e != 0 {
			errs = append(errs, fmt.Errorf("ibv_destroy_comp_channel: %w", unix.Errno(e)))
		}
		c.ch = nil
	}
	return errors.Join(errs...)
}

// Poll writes completions straight into wcs (verbs.WC has the C layout).
func (c *cq) Poll(wcs []verbs.WC) (int, error) {
	if err := c.d.check("ibv_poll_cq"); err != nil {
		return 0, err
	}
	if len(wcs) == 0 {
		return 0, nil
	}
	crossings.Add(1)
	n := C.rn_poll(c.cq, C.int(len(wcs)), (*C.struct_rn_wc_out)(unsafe.Pointer(&wcs[0])))
	if n < 0 {
		return 0, fmt.Errorf("ibv_poll_cq: %w", unix.Errno(-n))
	}
	if c.sendErr != nil {
		noteSendErrors(c.sendErr, wcs[:n])
	}
	return int(n), nil
}

func (c *cq) ReqNotify() error {
	if err := c.d.check("ibv_req_notify_cq"); err != nil {
		return err
	}
	crossings.Add(1)
	c.owed.Add(1) // before the arm: its event may come at once
	if e := C.rn_req_notify(c.cq); e != 0 {
		return fmt.Errorf("ibv_req_notify_cq: %w", unix.Errno(e))
	}
	return nil
}

func (c *cq) Channel() verbs.Channel { return (*compChannel)(c) }

// compChannel is the CQ's completion channel.
type compChannel cq

// Fd is the channel's non-blocking fd, owned by the channel (closed by
// ibv_destroy_comp_channel): dup it for a poller.
func (ch *compChannel) Fd() int { return ch.fd }

// GetEvents drains the channel: ibv_get_cq_event until EAGAIN, or until
// as many events were read as arms could have raised (cq.owed): with none
// owed it reads nothing.
func (ch *compChannel) GetEvents() (int, error) { return ch.getEvents(false) }

// getEvents is GetEvents, reading until EAGAIN whatever owed says when
// eager (the waiter's eager pattern: poller.SetEagerDrain).
func (ch *compChannel) getEvents(eager bool) (int, error) {
	c := (*cq)(ch)
	if err := c.d.check("ibv_get_cq_event"); err != nil {
		return 0, err
	}
	max := c.owed.Load()
	if eager {
		max = 0
	} else if max <= 0 {
		return 0, nil
	}
	var n C.int
	crossings.Add(1)
	e := C.rn_get_cq_events(c.ch, C.int(max), &n)
	c.owed.Add(-int64(n))
	c.evMu.Lock()
	c.got += uint64(n)
	c.evMu.Unlock()
	if e != 0 {
		return int(n), fmt.Errorf("ibv_get_cq_event: %w", unix.Errno(e))
	}
	return int(n), nil
}

// AckEvents acknowledges n events; they are passed to ibv_ack_cq_events
// in batches, and whatever is left when the ID closes is acked then.
func (ch *compChannel) AckEvents(n int) {
	c := (*cq)(ch)
	if n <= 0 {
		return
	}
	c.evMu.Lock()
	defer c.evMu.Unlock()
	if c.cq == nil {
		return
	}
	c.pending += uint32(n)
	if c.pending >= ackBatch {
		crossings.Add(1)
		C.rn_ack_cq_events(c.cq, C.uint(c.pending))
		c.acked += uint64(c.pending)
		c.pending = 0
	}
}

// Unread cannot tell: ibv_poll_cq takes the completions it finds and no
// verb only looks, so it answers known false (rdmanet then polls and
// keeps what it finds for the next read).
func (c *cq) Unread() (pending, known bool) { return false, false }
