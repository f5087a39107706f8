package rdmanet

import (
	"fmt"

	"github.com/go-rdma/rdmanet/internal/poller"
	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/ipoib"
)

// eventState runs one goroutine per conn that waits, in the netpoller, for
// the ID's asynchronous events: multicast errors (rejoin) and device
// removal (fail every call).
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
	c.ev.done = make(chan struct{})
	c.ev.stopped = make(chan struct{})
	go c.eventLoop()
	return nil
}

func (c *Conn) eventLoop() {
	defer close(c.ev.stopped)
	for {
		if _, err := c.ev.waiter.Wait(); err != nil {
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
				}(ipoib.GID(ev.MGID))
			case verbs.EventDeviceRemoval:
				err := fmt.Errorf("%w: %s", verbs.ErrDeviceRemoved, c.local.Device)
				c.fatalErr.CompareAndSwap(nil, &err)
				c.rd.waiter.Close() // unblock readers and writers
				c.wr.waiter.Close()
			}
		}
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
