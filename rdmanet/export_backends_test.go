//go:build linux

// The test backends: providers registered under names of their own that
// wrap the software provider (one, rdma-core) to change what a conn sees,
// for the faults and counts the software provider alone does not give. A
// test names one in ListenConfig.Backend. testProvider and its wrappers
// are how each is made; FaultBackend makes one per test, with hooks for
// each verb to fail; the fixed ones below it each change one thing.

package rdmanet

import (
	"context"
	"errors"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/poller"
	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/internal/verbs/soft"
)

// testProvider is a test backend: the provider named base, whose IDs wrap
// wraps to change what the conn sees. It serves no address by itself: a
// test names it in ListenConfig.Backend. Each backend below is one.
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

// Faults says how the verbs of a FaultBackend differ from the software
// provider's. Each hook that is set runs first; where it returns an
// error, that is the verb's and the provider's verb does not run. The
// hooks are set before the listen and not changed after (a test that
// toggles one does it inside the hook, with an atomic).
type Faults struct {
	Devices         func() error                      // Provider.Devices
	DeviceAttrs     func([]verbs.DeviceAttr)          // changes what a Devices that succeeded returns
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
	devs, err := p.testProvider.Devices()
	if err == nil && p.f.DeviceAttrs != nil {
		devs = slices.Clone(devs)
		p.f.DeviceAttrs(devs)
	}
	return devs, err
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

// BackendFailedCompletions is a test backend: the software provider,
// except that every send completion has an error status and no errno, as a
// device's error completion has on rdma-core.
const BackendFailedCompletions = "test-failed-completions"

func init() {
	verbs.Register(testProvider{name: BackendFailedCompletions, base: verbs.Software,
		wrap: wrapQPs(func(qp verbs.QP) verbs.QP { return failingQP{qp} })})
}

type failingQP struct{ verbs.QP }

func (q failingQP) SendCQ() verbs.CQ { return hookCQ{q.QP.SendCQ(), fail} }
func (q failingQP) PollPostSend(wcs []verbs.WC, wrs []verbs.SendWR) (int, int, error) {
	return verbs.PollThenPost(q, wcs, wrs) // through the failing CQ
}

// fail gives completions an error status and no errno.
func fail(wcs []verbs.WC) {
	for i := range wcs {
		wcs[i].Status, wcs[i].Errno = verbs.WCFatalErr, 0
	}
}

// BackendFatalCompletions is a test backend: BackendFailedCompletions
// (every send completion has an error status), whose QP is moreover in
// the error state (Ready false) from the first failed completion polled
// until it is Reset, as a QP after a fatal completion on rdma-core.
const BackendFatalCompletions = "test-fatal-completions"

func init() {
	verbs.Register(testProvider{name: BackendFatalCompletions, base: verbs.Software,
		wrap: func(id verbs.ID) verbs.ID { return fatalID{id} }})
}

type fatalID struct{ verbs.ID }

func (f fatalID) CreateQP(cfg verbs.QPConfig) (verbs.QP, error) {
	qp, err := f.ID.CreateQP(cfg)
	if err != nil {
		return nil, err
	}
	return &fatalQP{QP: qp}, nil
}

type fatalQP struct {
	verbs.QP
	broken atomic.Bool
}

func (q *fatalQP) SendCQ() verbs.CQ {
	return hookCQ{q.QP.SendCQ(), func(wcs []verbs.WC) {
		fail(wcs)
		if len(wcs) > 0 {
			q.broken.Store(true)
		}
	}}
}
func (q *fatalQP) PollPostSend(wcs []verbs.WC, wrs []verbs.SendWR) (int, int, error) {
	return verbs.PollThenPost(q, wcs, wrs) // through the failing CQ
}
func (q *fatalQP) Ready() (bool, error) { return !q.broken.Load(), nil }
func (q *fatalQP) Reset() error {
	err := q.QP.Reset()
	if err == nil {
		q.broken.Store(false)
	}
	return err
}

// BackendFirstSendFails is a test backend: the software provider, except
// that the completion of the first send (work request 0) has an error
// status; every later one succeeds.
const BackendFirstSendFails = "test-first-send-fails"

func init() {
	verbs.Register(testProvider{name: BackendFirstSendFails, base: verbs.Software,
		wrap: wrapQPs(func(qp verbs.QP) verbs.QP { return firstFailQP{qp} })})
}

type firstFailQP struct{ verbs.QP }

func (q firstFailQP) SendCQ() verbs.CQ { return hookCQ{q.QP.SendCQ(), failFirst} }
func (q firstFailQP) PollPostSend(wcs []verbs.WC, wrs []verbs.SendWR) (int, int, error) {
	return verbs.PollThenPost(q, wcs, wrs) // through the hooked CQ
}

// failFirst gives work request 0's completion an error status and no
// errno.
func failFirst(wcs []verbs.WC) {
	for i := range wcs {
		if wcs[i].WRID == 0 {
			wcs[i].Status, wcs[i].Errno = verbs.WCFatalErr, 0
		}
	}
}

// BackendPartialPosts is a test backend: the software provider, whose
// send post of more than one work request posts only the first and
// fails the rest with ENOBUFS, as a kernel that took part of a batch.
const BackendPartialPosts = "test-partial-posts"

func init() {
	verbs.Register(testProvider{name: BackendPartialPosts, base: verbs.Software,
		wrap: wrapQPs(func(qp verbs.QP) verbs.QP { return partialPostQP{qp} })})
}

type partialPostQP struct{ verbs.QP }

func (q partialPostQP) PostSend(wrs []verbs.SendWR) (int, error) {
	if len(wrs) <= 1 {
		return q.QP.PostSend(wrs)
	}
	n, err := q.QP.PostSend(wrs[:1])
	if err != nil {
		return n, err
	}
	return n, os.NewSyscallError("sendto", syscall.ENOBUFS)
}

func (q partialPostQP) PollPostSend(wcs []verbs.WC, wrs []verbs.SendWR) (int, int, error) {
	return verbs.PollThenPost(q, wcs, wrs) // through the partial PostSend
}

// BackendCountingPosts is a test backend: the software provider, whose
// QP records how many work requests each send post carried (PostSend
// and PollPostSend alike), read by SendPosts.
const BackendCountingPosts = "test-counting-posts"

func init() {
	verbs.Register(testProvider{name: BackendCountingPosts, base: verbs.Software,
		wrap: func(id verbs.ID) verbs.ID { return postCountingID{id} }})
}

type postCountingID struct{ verbs.ID }

func (p postCountingID) CreateQP(cfg verbs.QPConfig) (verbs.QP, error) {
	qp, err := p.ID.CreateQP(cfg)
	if err != nil {
		return nil, err
	}
	return &postCountingQP{QP: qp}, nil
}

type postCountingQP struct {
	verbs.QP
	mu    sync.Mutex
	posts []int
}

func (q *postCountingQP) record(n int) {
	q.mu.Lock()
	q.posts = append(q.posts, n)
	q.mu.Unlock()
}

func (q *postCountingQP) PostSend(wrs []verbs.SendWR) (int, error) {
	q.record(len(wrs))
	return q.QP.PostSend(wrs)
}

func (q *postCountingQP) PollPostSend(wcs []verbs.WC, wrs []verbs.SendWR) (int, int, error) {
	if len(wrs) > 0 {
		q.record(len(wrs))
	}
	return q.QP.PollPostSend(wcs, wrs)
}

// SendPosts returns the work requests of each send post of c, a
// BackendCountingPosts conn, since the last call.
func SendPosts(c *Conn) []int {
	q := c.qp.(*postCountingQP)
	q.mu.Lock()
	defer q.mu.Unlock()
	p := q.posts
	q.posts = nil
	return p
}

// BackendStuckSends is a test backend: the software provider, except that
// send completions never arrive, so the send ring fills and writes block.
const BackendStuckSends = "test-stuck-sends"

// BackendStuckSendsRDMACore is BackendStuckSends over rdma-core: sends go
// to the device, but the conn never sees their completions, so the send
// ring fills and writes block (a real device completes them too fast to
// block a write on purpose).
const BackendStuckSendsRDMACore = "test-stuck-sends-rdma-core"

func init() {
	stuck := func(id verbs.ID) verbs.ID { return &stuckID{ID: id} }
	verbs.Register(testProvider{name: BackendStuckSends, base: verbs.Software, wrap: stuck})
	verbs.Register(testProvider{name: BackendStuckSendsRDMACore, base: verbs.RDMACore, wrap: stuck})
}

type stuckID struct {
	verbs.ID
	cq *stuckCQ
}

func (s *stuckID) CreateQP(cfg verbs.QPConfig) (verbs.QP, error) {
	qp, err := s.ID.CreateQP(cfg)
	if err != nil {
		return nil, err
	}
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	s.cq = &stuckCQ{efd: efd}
	return &stuckQP{QP: qp, cq: s.cq}, nil
}

func (s *stuckID) Close() error {
	err := s.ID.Close()
	if s.cq != nil {
		unix.Close(s.cq.efd)
		s.cq = nil
	}
	return err
}

type stuckQP struct {
	verbs.QP
	cq *stuckCQ
}

func (q *stuckQP) SendCQ() verbs.CQ { return q.cq }
func (q *stuckQP) PollPostSend(wcs []verbs.WC, wrs []verbs.SendWR) (int, int, error) {
	return verbs.PollThenPost(q, wcs, wrs) // through the stuck CQ
}

// stuckCQ never completes anything; its channel never fires.
type stuckCQ struct{ efd int }

func (c *stuckCQ) Poll([]verbs.WC) (int, error) { return 0, nil }
func (c *stuckCQ) ReqNotify() error             { return nil }
func (c *stuckCQ) Channel() verbs.Channel       { return c }
func (c *stuckCQ) Fd() int                      { return c.efd }
func (c *stuckCQ) GetEvents() (int, error)      { return 0, nil }
func (c *stuckCQ) AckEvents(int)                {}
func (c *stuckCQ) Arm() error                   { return nil }
func (c *stuckCQ) Drain() (int, error)          { return 0, nil }
func (c *stuckCQ) Unread() (bool, bool)         { return false, true }

// NewWaiter waits on the eventfd, which nothing writes.
func (c *stuckCQ) NewWaiter(time.Duration) (verbs.CQWaiter, error) {
	w, err := poller.New(c.efd, "rdmanet-stuck-cq", stuckSource{c}, 0)
	if err != nil {
		return nil, err
	}
	return stuckWaiter{w}, nil
}

type stuckSource struct{ *stuckCQ }

func (s stuckSource) Poll() (int, error) { return 0, nil }

type stuckWaiter struct{ *poller.Waiter }

func (w stuckWaiter) WaitPoll([]verbs.WC) (int, error) { return w.Wait() }

// BackendCountingAHs is a test backend: the software provider, whose QP
// counts the address handles it made and those still open, read by
// AHCounts.
const BackendCountingAHs = "test-counting-ahs"

func init() {
	verbs.Register(testProvider{name: BackendCountingAHs, base: verbs.Software,
		wrap: wrapQPs(func(qp verbs.QP) verbs.QP { return &ahCountingQP{QP: qp} })})
}

type ahCountingQP struct {
	verbs.QP
	made, open atomic.Int64
}

func (q *ahCountingQP) CreateAH(attr verbs.AHAttr) (verbs.AH, error) {
	ah, err := q.QP.CreateAH(attr)
	if err != nil {
		return nil, err
	}
	q.made.Add(1)
	q.open.Add(1)
	return &countedAH{AH: ah, qp: q}, nil
}

// PostSend posts wrs with the provider's own AHs in them, as it checks
// (a test's copy: this backend is not for the cost of a post).
func (q *ahCountingQP) PostSend(wrs []verbs.SendWR) (int, error) {
	own := make([]verbs.SendWR, len(wrs))
	copy(own, wrs)
	for i := range own {
		if a, ok := own[i].AH.(*countedAH); ok {
			own[i].AH = a.AH
		}
	}
	return q.QP.PostSend(own)
}

func (q *ahCountingQP) PollPostSend(wcs []verbs.WC, wrs []verbs.SendWR) (int, int, error) {
	return verbs.PollThenPost(q, wcs, wrs) // through PostSend above
}

type countedAH struct {
	verbs.AH
	qp     *ahCountingQP
	closed atomic.Bool
}

func (a *countedAH) Close() error {
	if a.closed.CompareAndSwap(false, true) {
		a.qp.open.Add(-1)
	}
	return a.AH.Close()
}

// AHCounts returns how many address handles c's QP made and how many of
// them are open; c uses BackendCountingAHs.
func AHCounts(c *Conn) (made, open int64) {
	q := c.qp.(*ahCountingQP)
	return q.made.Load(), q.open.Load()
}

// InjectQPError puts the software QP under c's test backend wrapping in
// the error state and reports QP_FATAL, as InjectEvent does for a
// software conn.
func InjectQPError(c *Conn) error {
	return soft.InjectEvent(c.id.(qpWrapID).ID, verbs.Event{Type: verbs.EventQPError})
}

// BackendCountingRecvs is a test backend: the software provider, with a
// count of the receives its QP holds posted (posted by PostRecv, not yet
// completed by a poll of the receive CQ, nor dropped by a reset), read by
// PostedRecvs, and a count of receives posted with the buffer (WRID) of
// one the QP holds already, read by RepostedWhilePosted.
const BackendCountingRecvs = "test-counting-recvs"

func init() {
	verbs.Register(testProvider{name: BackendCountingRecvs, base: verbs.Software,
		wrap: wrapQPs(func(qp verbs.QP) verbs.QP { return &countingQP{QP: qp, out: map[uint64]bool{}} })})
}

type countingQP struct {
	verbs.QP
	posted atomic.Int64
	mu     sync.Mutex      // a post and the completions polled apart
	out    map[uint64]bool // the WRIDs posted, not completed
	twice  atomic.Int64
}

func (q *countingQP) PostRecv(wrs []verbs.RecvWR) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	n, err := q.QP.PostRecv(wrs)
	q.posted.Add(int64(n))
	for _, wr := range wrs[:n] {
		if q.out[wr.WRID] {
			q.twice.Add(1)
		}
		q.out[wr.WRID] = true
	}
	return n, err
}

func (q *countingQP) RecvCQ() verbs.CQ {
	return hookCQ{q.QP.RecvCQ(), func(wcs []verbs.WC) {
		q.mu.Lock()
		defer q.mu.Unlock()
		q.posted.Add(-int64(len(wcs)))
		for _, wc := range wcs {
			delete(q.out, wc.WRID)
		}
	}}
}

// Reset drops every posted receive, as the software QP's reset does.
func (q *countingQP) Reset() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	err := q.QP.Reset()
	if err == nil {
		q.posted.Store(0)
		clear(q.out)
	}
	return err
}

// PostedRecvs returns how many receives c's QP holds posted; c is a
// BackendCountingRecvs conn.
func PostedRecvs(c *Conn) int { return int(c.qp.(*countingQP).posted.Load()) }

// RepostedWhilePosted returns how many receives c's QP was given with
// the WRID (the ring slot) of a receive it held posted: a buffer that
// two datagrams could then fill; c is a BackendCountingRecvs conn.
func RepostedWhilePosted(c *Conn) int { return int(c.qp.(*countingQP).twice.Load()) }

// BackendKeptCompletions is a test backend: the software provider, whose
// QP reset keeps the receive completions that were waiting (the
// datagrams already in its sockets, polled just before the reset), to be
// polled after it, as a device's CQ may still hold completions from
// before a reset. (The software QP's reset drops its posted receives, so
// its own CQ holds none after one.) Only Poll returns them, not a
// waiter's WaitPoll: reclaimRecvs is what must take them.
const BackendKeptCompletions = "test-kept-completions"

func init() {
	verbs.Register(testProvider{name: BackendKeptCompletions, base: verbs.Software,
		wrap: wrapQPs(func(qp verbs.QP) verbs.QP { return &keptQP{QP: qp} })})
}

type keptQP struct {
	verbs.QP
	mu      sync.Mutex
	kept    []verbs.WC
	atReset int
}

func (q *keptQP) Reset() error {
	wcs := make([]verbs.WC, 64)
	q.mu.Lock()
	for {
		n, err := q.QP.RecvCQ().Poll(wcs)
		q.kept = append(q.kept, wcs[:n]...)
		if n == 0 || err != nil {
			break
		}
	}
	q.atReset = len(q.kept)
	q.mu.Unlock()
	return q.QP.Reset()
}

func (q *keptQP) RecvCQ() verbs.CQ { return keptCQ{q.QP.RecvCQ(), q} }

type keptCQ struct {
	verbs.CQ
	q *keptQP
}

func (c keptCQ) Poll(wcs []verbs.WC) (int, error) {
	q := c.q
	q.mu.Lock()
	if len(q.kept) > 0 {
		n := copy(wcs, q.kept)
		q.kept = q.kept[n:]
		q.mu.Unlock()
		return n, nil
	}
	q.mu.Unlock()
	return c.CQ.Poll(wcs)
}

// KeptCompletions returns how many receive completions c's QP kept at
// its last reset and how many of them are not polled yet; c is a
// BackendKeptCompletions conn.
func KeptCompletions(c *Conn) (atReset, left int) {
	q := c.qp.(*keptQP)
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.atReset, len(q.kept)
}

// BackendNoSockets is a test backend: the software provider, except that
// its QP says it has no sockets (SocketBuffer 0, SetSocketBuffer
// ErrNotSupported), as rdma-core's: the conn's buffers are then its
// rings, as on rdma-core.
const BackendNoSockets = "test-no-sockets"

func init() {
	verbs.Register(testProvider{name: BackendNoSockets, base: verbs.Software,
		wrap: func(id verbs.ID) verbs.ID { return noSocketsID{id} }})
}

type noSocketsID struct{ verbs.ID }

func (n noSocketsID) CreateQP(cfg verbs.QPConfig) (verbs.QP, error) {
	qp, err := n.ID.CreateQP(cfg)
	if err != nil {
		return nil, err
	}
	return noSocketsQP{qp}, nil
}

type noSocketsQP struct{ verbs.QP }

func (noSocketsQP) SocketBuffer(bool) int { return 0 }
func (noSocketsQP) SetSocketBuffer(bool, int) (int, error) {
	return 0, verbs.ErrNotSupported
}

// BackendUnknownLimit is a test backend: the software provider, whose
// devices (named "unknown-limit-" and the software device's name, so
// that Devices lists them apart) report no max_qp_wr (0: unknown), and
// whose CreateQP fails with ErrCreateQPRefused.
const BackendUnknownLimit = "test-unknown-limit"

// ErrCreateQPRefused is BackendUnknownLimit's CreateQP error.
var ErrCreateQPRefused = errors.New("test: CreateQP refused")

const unknownLimitPrefix = "unknown-limit-"

func init() {
	verbs.Register(unknownLimitProvider{testProvider{name: BackendUnknownLimit, base: verbs.Software,
		wrap: func(id verbs.ID) verbs.ID { return refusingID{id} }}})
}

type unknownLimitProvider struct{ testProvider }

func (p unknownLimitProvider) Devices() ([]verbs.DeviceAttr, error) {
	devs, err := p.testProvider.Devices()
	devs = slices.Clone(devs)
	for i := range devs {
		devs[i].Name = unknownLimitPrefix + devs[i].Name
		devs[i].MaxQPWR = 0
	}
	return devs, err
}

type refusingID struct{ verbs.ID }

func (refusingID) CreateQP(verbs.QPConfig) (verbs.QP, error) { return nil, ErrCreateQPRefused }

func (r refusingID) Local() verbs.Binding {
	b := r.ID.Local()
	b.Device = unknownLimitPrefix + b.Device
	return b
}

// BackendUnknownUnread is a test backend: the software provider, whose
// receive CQ cannot tell without polling whether completions wait
// (Unread: not known), as rdma-core's.
const BackendUnknownUnread = "test-unknown-unread"

func init() {
	verbs.Register(testProvider{name: BackendUnknownUnread, base: verbs.Software,
		wrap: wrapQPs(func(qp verbs.QP) verbs.QP { return unknownUnreadQP{qp} })})
}

type unknownUnreadQP struct{ verbs.QP }

func (q unknownUnreadQP) RecvCQ() verbs.CQ { return unknownUnreadCQ{q.QP.RecvCQ()} }

type unknownUnreadCQ struct{ verbs.CQ }

func (unknownUnreadCQ) Unread() (bool, bool) { return false, false }

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

// BackendFailingRetries is a test backend: the software provider, whose
// group joins and QP resets fail as many times as FailJoins and
// FailResets say, so that the conn's retries run.
const BackendFailingRetries = "test-failing-retries"

var errInjected = errors.New("injected failure")

func init() {
	verbs.Register(testProvider{name: BackendFailingRetries, base: verbs.Software,
		wrap: func(id verbs.ID) verbs.ID { return &retryID{ID: id} }})
}

type retryID struct {
	verbs.ID
	failJoins, failResets atomic.Int32
}

// take reports whether one more of n's failures is due, using it up.
func take(n *atomic.Int32) bool {
	for {
		v := n.Load()
		if v <= 0 {
			return false
		}
		if n.CompareAndSwap(v, v-1) {
			return true
		}
	}
}

func (id *retryID) Join(ctx context.Context, g verbs.Group, opt verbs.JoinOptions) (verbs.Membership, error) {
	if take(&id.failJoins) {
		return verbs.Membership{}, errInjected
	}
	return id.ID.Join(ctx, g, opt)
}

func (id *retryID) CreateQP(cfg verbs.QPConfig) (verbs.QP, error) {
	qp, err := id.ID.CreateQP(cfg)
	if err != nil {
		return nil, err
	}
	return retryQP{qp, id}, nil
}

type retryQP struct {
	verbs.QP
	id *retryID
}

func (q retryQP) Reset() error {
	if take(&q.id.failResets) {
		return errInjected
	}
	return q.QP.Reset()
}

// FailJoins makes the next n group joins of c (on BackendFailingRetries)
// fail.
func FailJoins(c *Conn, n int32) { c.id.(*retryID).failJoins.Store(n) }

// FailResets makes the next n QP resets of c (on BackendFailingRetries)
// fail.
func FailResets(c *Conn, n int32) { c.id.(*retryID).failResets.Store(n) }

// InjectRetryEvent is InjectEvent for a conn on BackendFailingRetries.
func InjectRetryEvent(c *Conn, ev verbs.Event) error {
	return soft.InjectEvent(c.id.(*retryID).ID, ev)
}
