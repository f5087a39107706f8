//go:build linux

package rdmanet

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/internal/verbs/soft"
)

// Faults says how the verbs of a FaultBackend differ from the software
// provider's. Each hook that is set runs first; where it returns an
// error, that is the verb's and the provider's verb does not run. The
// hooks are set before the listen and not changed after (a test that
// toggles one does it inside the hook, with an atomic).
type Faults struct {
	Devices         func() error                      // Provider.Devices
	Local           func(verbs.Binding) verbs.Binding // what ID.Local reports
	CreateQP        func() error
	EventWaiter     func() error // the event channel's NewWaiter
	Join            func(verbs.Group) error
	Joined          func(verbs.Membership) verbs.Membership // what a Join that succeeded returns
	MaxInline       func(int) int                           // what QP.MaxInline reports
	RegisterMemory  func() error
	MRClose         func() error // before an MR's Close, which runs anyway
	CreateAH        func(verbs.AHAttr) error
	PostRecv        func() error
	RecvPoll        func() error     // before a Poll of the receive CQ (not a waiter's)
	RecvWCs         func([]verbs.WC) // the receive completions, polled or waited for
	UnreadUnknown   bool             // the receive CQ's Unread cannot tell, as rdma-core's
	SendPoll        func() error     // before a Poll of the send CQ (not a waiter's)
	SendWCs         func([]verbs.WC) // the send completions, polled or waited for
	PostSend        func([]verbs.SendWR) (handled bool, n int, err error)
	SetSocketBuffer func(recv bool) error
	DropCounts      func(map[string]uint64) map[string]uint64
}

// FaultBackend registers a test backend named name (a test's own: two
// tests never share one): the software provider, with its verbs changed
// as f says. Send posts and polls run through the hooks (PollPostSend is
// a poll then a post). It returns name, for ListenConfig.Backend.
// Registering a name again replaces its backend.
func FaultBackend(name string, f *Faults) string {
	verbs.Register(faultProvider{testProvider{name: name, base: verbs.Software,
		wrap: func(id verbs.ID) verbs.ID { return &faultID{ID: id, f: f} }}, f})
	return name
}

// InjectFaultEvent is InjectEvent for a conn on a FaultBackend.
func InjectFaultEvent(c *Conn, ev verbs.Event) error {
	return soft.InjectEvent(c.id.(*faultID).ID, ev)
}

type faultProvider struct {
	testProvider
	f *Faults
}

func (p faultProvider) Devices() ([]verbs.DeviceAttr, error) {
	if p.f.Devices != nil {
		if err := p.f.Devices(); err != nil {
			return nil, err
		}
	}
	return p.testProvider.Devices()
}

type faultID struct {
	verbs.ID
	f *Faults
}

func (id *faultID) Local() verbs.Binding {
	b := id.ID.Local()
	if id.f.Local != nil {
		b = id.f.Local(b)
	}
	return b
}

func (id *faultID) CreateQP(cfg verbs.QPConfig) (verbs.QP, error) {
	if id.f.CreateQP != nil {
		if err := id.f.CreateQP(); err != nil {
			return nil, err
		}
	}
	qp, err := id.ID.CreateQP(cfg)
	if err != nil {
		return nil, err
	}
	return &faultQP{QP: qp, f: id.f}, nil
}

func (id *faultID) Join(ctx context.Context, g verbs.Group, opt verbs.JoinOptions) (verbs.Membership, error) {
	if id.f.Join != nil {
		if err := id.f.Join(g); err != nil {
			return verbs.Membership{}, err
		}
	}
	m, err := id.ID.Join(ctx, g, opt)
	if err == nil && id.f.Joined != nil {
		m = id.f.Joined(m)
	}
	return m, err
}

func (id *faultID) Events() verbs.EventChannel { return faultEvents{id.ID.Events(), id.f} }

type faultEvents struct {
	verbs.EventChannel
	f *Faults
}

func (e faultEvents) NewWaiter() (verbs.EventWaiter, error) {
	if e.f.EventWaiter != nil {
		if err := e.f.EventWaiter(); err != nil {
			return nil, err
		}
	}
	return e.EventChannel.NewWaiter()
}

type faultQP struct {
	verbs.QP
	f *Faults
}

func (q *faultQP) MaxInline() int {
	if q.f.MaxInline != nil {
		return q.f.MaxInline(q.QP.MaxInline())
	}
	return q.QP.MaxInline()
}

func (q *faultQP) RegisterMemory(a *verbs.Arena) (verbs.MR, error) {
	if q.f.RegisterMemory != nil {
		if err := q.f.RegisterMemory(); err != nil {
			return nil, err
		}
	}
	mr, err := q.QP.RegisterMemory(a)
	if err != nil || q.f.MRClose == nil {
		return mr, err
	}
	return faultMR{mr, q.f}, nil
}

type faultMR struct {
	verbs.MR
	f *Faults
}

func (m faultMR) Close() error {
	ferr := m.f.MRClose()
	if err := m.MR.Close(); err != nil {
		return err
	}
	return ferr
}

func (q *faultQP) CreateAH(attr verbs.AHAttr) (verbs.AH, error) {
	if q.f.CreateAH != nil {
		if err := q.f.CreateAH(attr); err != nil {
			return nil, err
		}
	}
	return q.QP.CreateAH(attr)
}

func (q *faultQP) PostRecv(wrs []verbs.RecvWR) (int, error) {
	if q.f.PostRecv != nil {
		if err := q.f.PostRecv(); err != nil {
			return 0, err
		}
	}
	return q.QP.PostRecv(wrs)
}

func (q *faultQP) PostSend(wrs []verbs.SendWR) (int, error) {
	if q.f.PostSend != nil {
		if handled, n, err := q.f.PostSend(wrs); handled {
			return n, err
		}
	}
	return q.QP.PostSend(wrs)
}

func (q *faultQP) PollPostSend(wcs []verbs.WC, wrs []verbs.SendWR) (int, int, error) {
	return verbs.PollThenPost(q, wcs, wrs) // through the hooks
}

func (q *faultQP) RecvCQ() verbs.CQ {
	return faultCQ{q.QP.RecvCQ(), q.f.RecvPoll, q.f.RecvWCs, q.f.UnreadUnknown}
}
func (q *faultQP) SendCQ() verbs.CQ { return faultCQ{q.QP.SendCQ(), q.f.SendPoll, q.f.SendWCs, false} }

func (q *faultQP) SetSocketBuffer(recv bool, bytes int) (int, error) {
	if q.f.SetSocketBuffer != nil {
		if err := q.f.SetSocketBuffer(recv); err != nil {
			return 0, err
		}
	}
	return q.QP.SetSocketBuffer(recv, bytes)
}

func (q *faultQP) DropCounts() map[string]uint64 {
	m := q.QP.DropCounts()
	if q.f.DropCounts != nil {
		m = q.f.DropCounts(m)
	}
	return m
}

// faultCQ is a CQ whose Poll runs poll first and whose completions,
// polled or waited for, pass through wcs.
type faultCQ struct {
	verbs.CQ
	poll    func() error
	wcs     func([]verbs.WC)
	unknown bool
}

func (c faultCQ) Unread() (bool, bool) {
	if c.unknown {
		return false, false
	}
	return c.CQ.Unread()
}

func (c faultCQ) after(wcs []verbs.WC) {
	if c.wcs != nil {
		c.wcs(wcs)
	}
}

func (c faultCQ) Poll(wcs []verbs.WC) (int, error) {
	if c.poll != nil {
		if err := c.poll(); err != nil {
			return 0, err
		}
	}
	n, err := c.CQ.Poll(wcs)
	c.after(wcs[:n])
	return n, err
}

func (c faultCQ) NewWaiter(spin time.Duration) (verbs.CQWaiter, error) {
	w, err := c.CQ.NewWaiter(spin)
	if err != nil || c.wcs == nil {
		return w, err
	}
	return hookWaiter{w, c.after}, nil
}

// StandInRDMACore is a provider named rdma-core that is the software
// provider, available, and serving a BindConfig where serves says: the
// auto backend's choice where no RDMA device is.
func StandInRDMACore(serves *atomic.Bool) verbs.Provider {
	return standIn{testProvider{name: verbs.RDMACore, base: verbs.Software,
		wrap: func(id verbs.ID) verbs.ID { return id }}, serves}
}

type standIn struct {
	testProvider
	serves *atomic.Bool
}

func (s standIn) Serves(verbs.BindConfig) bool { return s.serves.Load() }
