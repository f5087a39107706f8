//go:build linux

package rdmanet

import (
	"time"

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

// DropCountKeys returns the keys of the drop counters of c's QP (all of
// them, zero or not), and whether it counts drops at all.
func DropCountKeys(c *Conn) ([]string, bool) {
	var keys []string
	for k := range c.qp.DropCounts() {
		keys = append(keys, k)
	}
	return keys, keys != nil
}

// testProvider is a test backend: the provider named base, whose IDs wrap
// wraps to change what the conn sees. It serves no address by itself: a
// test names it in ListenConfig.Backend. The export_*_test.go files
// register one each.
type testProvider struct {
	name, base string
	wrap       func(verbs.ID) verbs.ID
}

func (p testProvider) baseProvider() verbs.Provider {
	b, err := verbs.Lookup(p.base)
	if err != nil {
		panic(err)
	}
	return b
}

func (p testProvider) Name() string                         { return p.name }
func (p testProvider) Available() error                     { return p.baseProvider().Available() }
func (p testProvider) Devices() ([]verbs.DeviceAttr, error) { return p.baseProvider().Devices() }
func (testProvider) Serves(verbs.BindConfig) bool           { return false }
func (p testProvider) Bind(cfg verbs.BindConfig) (verbs.ID, error) {
	id, err := p.baseProvider().Bind(cfg)
	if err != nil {
		return nil, err
	}
	return p.wrap(id), nil
}

// wrapQPs is a testProvider wrap for IDs whose QPs wrap wraps.
func wrapQPs(wrap func(verbs.QP) verbs.QP) func(verbs.ID) verbs.ID {
	return func(id verbs.ID) verbs.ID { return qpWrapID{id, wrap} }
}

type qpWrapID struct {
	verbs.ID
	wrap func(verbs.QP) verbs.QP
}

func (id qpWrapID) CreateQP(cfg verbs.QPConfig) (verbs.QP, error) {
	qp, err := id.ID.CreateQP(cfg)
	if err != nil {
		return nil, err
	}
	return id.wrap(qp), nil
}

// hookCQ is a CQ whose completions, polled or waited for, pass through
// after before the conn sees them.
type hookCQ struct {
	verbs.CQ
	after func([]verbs.WC)
}

func (c hookCQ) Poll(wcs []verbs.WC) (int, error) {
	n, err := c.CQ.Poll(wcs)
	c.after(wcs[:n])
	return n, err
}

func (c hookCQ) NewWaiter(spin time.Duration) (verbs.CQWaiter, error) {
	w, err := c.CQ.NewWaiter(spin)
	if err != nil {
		return nil, err
	}
	return hookWaiter{w, c.after}, nil
}

type hookWaiter struct {
	verbs.CQWaiter
	after func([]verbs.WC)
}

func (w hookWaiter) WaitPoll(wcs []verbs.WC) (int, error) {
	n, err := w.CQWaiter.WaitPoll(wcs)
	w.after(wcs[:n])
	return n, err
}
