package rdmanet

import (
	"fmt"
	"sync/atomic"

	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/ipoib"
)

// eventState runs one goroutine per conn that waits for the ID's
// asynchronous events with the provider's EventWaiter: multicast errors
// (rejoin), the port going down and up and QP errors (recover.go), and
// device removal (fail every call, free the device's objects).
type eventState struct {
	waiter  verbs.EventWaiter
	evs     []verbs.Event // what one WaitPoll collects
	done    chan struct{} // closed when the goroutine must stop
	stopped chan struct{} // closed when it has
}

// eventBatch is how many events one WaitPoll collects.
const eventBatch = 8

func (c *Conn) initEvents() error {
	w, err := c.id.Events().NewWaiter()
	if err != nil {
		return err
	}
	c.ev.waiter = w
	c.ev.evs = make([]verbs.Event, eventBatch)
	c.rec.lent = make([]atomic.Uint64, (c.cfg.RecvDepth+63)/64)
	c.ev.done = make(chan struct{})
	c.ev.stopped = make(chan struct{})
	go c.eventLoop()
	return nil
}

func (c *Conn) eventLoop() {
	defer close(c.ev.stopped)
	for {
		n, err := c.ev.waiter.WaitPoll(c.ev.evs)
		if err != nil && (n == 0 || c.closed.Load()) {
			return // closed
		}
		evs := c.ev.evs[:n]
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
		c.ev.waiter.Wake()
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
