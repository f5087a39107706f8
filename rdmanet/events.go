package rdmanet

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/go-rdma/rdmanet/internal/poller"
	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/ipoib"
)

// eventState runs one goroutine per conn that waits, in the netpoller, for
// the ID's asynchronous events: multicast errors (rejoin), the port going
// down and up and QP errors (recover.go), and device removal (fail every
// call, free the device's objects).
type eventState struct {
	waiter  *poller.Waiter
	src     eventSource
	done    chan struct{} // closed when the goroutine must stop
	stopped chan struct{} // closed when it has
}

type eventSource struct {
	ch      verbs.EventChannel
	pending []verbs.Event
}

func (s *eventSource) Poll() (int, error) {
	for {
		ev, ok, err := s.ch.Next()
		if err != nil {
			return len(s.pending), err
		}
		if !ok {
			return len(s.pending), nil
		}
		s.pending = append(s.pending, ev)
	}
}

func (s *eventSource) Arm() error          { return nil }
func (s *eventSource) Drain() (int, error) { return 0, nil }

func (c *Conn) initEvents() error {
	ch := c.id.Events()
	c.ev.src = eventSource{ch: ch}
	w, err := poller.New(ch.Fd(), "rdmanet-events", &c.ev.src, 0)
	if err != nil {
		return err
	}
	c.ev.waiter = w
	c.rec.lent = make([]atomic.Uint64, (c.cfg.RecvDepth+63)/64)
	c.ev.done = make(chan struct{})
	c.ev.stopped = make(chan struct{})
	go c.eventLoop()
	return nil
}

func (c *Conn) eventLoop() {
	defer close(c.ev.stopped)
	for {
		if _, err := c.ev.waiter.Wait(); errors.Is(err, os.ErrDeadlineExceeded) {
			// A kick: clear it first, then collect what is queued, so
			// that a kick racing this one is not lost.
			c.ev.waiter.SetDeadline(time.Time{})
			if _, err := c.ev.src.Poll(); err != nil && c.closed.Load() {
				return
			}
		} else if err != nil {
			return // closed
		}
		evs := c.ev.src.pending
		c.ev.src.pending = evs[:0:0]
		for _, ev := range evs {
			switch ev.Type {
			case verbs.EventMulticastError:
				c.bg.Add(1)
				go func(mgid ipoib.GID) {
					defer c.bg.Done()
					c.rejoin(mgid)
				}(ev.MGID)
			case verbs.EventDeviceRemoval:
				err := fmt.Errorf("%w: %s", verbs.ErrDeviceRemoved, c.local.Device)
				c.fatalErr.CompareAndSwap(nil, &err)
				c.rd.waiter.Close() // unblock readers and writers
				c.wr.waiter.Close()
				c.releaseDevice() // let the kernel finish removing it
				return
			case verbs.EventPortError, verbs.EventPortActive, verbs.EventQPError:
				c.handleFault(ev)
			}
		}
		c.startRecovery()
	}
}

// kickEvents makes the event goroutine look at the event queue. A provider
// may read events off the channel while it waits for a join (rdma-core
// does: one rdma_cm channel carries both) and queue the others for Next:
// the channel fd then has nothing left to wake the goroutine with.
func (c *Conn) kickEvents() {
	if c.ev.waiter != nil {
		c.ev.waiter.SetDeadline(time.Unix(1, 0))
	}
}

// stopEvents stops the event goroutine and waits for it.
func (c *Conn) stopEvents() {
	if c.ev.waiter == nil {
		return
	}
	select {
	case <-c.ev.done:
	default:
		close(c.ev.done)
	}
	c.ev.waiter.Close()
	<-c.ev.stopped
}
