//go:build linux

package poller

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Spin back-off: after spinMissesBeforeBackoff spins in a row that found
// nothing, waits skip spinning, at most 1<<maxSpinBackoffShift (64)
// between tries.
const (
	spinMissesBeforeBackoff = 4
	maxSpinBackoffShift     = 6
)

// eagerDrain, while set, gives the Waiters made meanwhile the eager
// wake-up pattern: a drain before every sleep, and a second one after
// every drain that found events. Only tests and benchmarks that measure
// both patterns set it (SetEagerDrain).
var eagerDrain atomic.Bool

// SetEagerDrain sets whether the Waiters made from now on drain eagerly
// (before every sleep, and twice after a wake) instead of only when the
// channel may hold an event, and returns the previous setting. It is for
// tests and benchmarks that measure the two patterns side by side; the
// default is off.
func SetEagerDrain(on bool) (was bool) { return eagerDrain.Swap(on) }

// Source is what a Waiter waits for: a CQ and its completion channel,
// or anything polled the same way (an ID's events).
type Source interface {
	// Poll collects completions without blocking and reports how many.
	Poll() (int, error)
	// Arm requests a notification for the next completion.
	Arm() error
	// Drain consumes the channel's pending events, leaving it dry, and
	// reports how many it consumed. Acknowledging them is the Source's
	// business.
	Drain() (int, error)
}

// woken is implemented by Sources that want to know that a wait ended
// because their fd became readable (the software provider's receive CQ
// then reads at once).
type woken interface{ Woken() }

// Waiter waits for one Source through one channel fd. Wait must not be
// called concurrently on the same Waiter; callers serialize (rdmanet holds
// its read or write lock around Wait).
type Waiter struct {
	f    *os.File
	rc   syscall.RawConn
	src  Source
	wk   woken // src, where it wants to know of wakes (asserted once)
	spin time.Duration
	// Spin back-off: misses counts spins in a row that found nothing;
	// from the spinMissesBeforeBackoff-th on, each is followed by waits
	// that skip spinning (skip counts them down), 1, 2, 4 ... up to
	// 1<<maxSpinBackoffShift. A spin that finds work resets both.
	skip, misses int
	level        bool // the fd is readable exactly while Poll has work
	armed        bool
	armedNow     bool // armed within the current rc.Read: no drain needed before sleeping
	slept        bool // the last step went to sleep: drain before polling
	closed       atomic.Bool
	eagerDrain   bool // SetEagerDrain was on when the Waiter was made
	// spinDL is the caller's deadline in unix nanoseconds (0: none), for
	// the spin, which looks at it between polls: the fds' deadline
	// wakes only a sleep.
	spinDL atomic.Int64
	// The narrow fd (SetNarrow): a second fd the wait may sleep on, as
	// narrow says before each sleep; nf is nil without one.
	nf     *os.File
	nrc    syscall.RawConn
	narrow Narrower
	// Kicks: kicked means the fds' deadlines are in the past to wake the
	// wait, and deadline is the caller's, put back when the kick is
	// consumed. dmu orders them.
	dmu      sync.Mutex
	stopped  bool // Stop: the deadline stays in the past
	files    bool // Close: the files are closed
	kicked   bool
	woke     atomic.Bool // Wake: the kicked Wait returns (0, nil)
	deadline time.Time
	n        int
	err      error
	fn       func(uintptr) bool // allocated once: Wait itself allocates nothing
}

// New makes a Waiter for src whose channel fd is fd. The Waiter owns a dup
// of fd, so the channel's own fd may be closed by its destroy verb (as
// ibv_destroy_comp_channel does) independently. spin is the spin window
// (0: none).
func New(fd int, name string, src Source, spin time.Duration) (*Waiter, error) {
	f, rc, err := dupFile(fd, name)
	if err != nil {
		return nil, err
	}
	w := &Waiter{f: f, rc: rc, src: src, spin: spin, eagerDrain: eagerDrain.Load()}
	w.fn = w.step
	w.wk, _ = src.(woken)
	return w, nil
}

// Adopt is New for an fd the Waiter takes over instead of a dup: its
// Close closes fd, and nothing else may (when Adopt fails, fd is the
// caller's again only if the error is from setnonblock; treat it as
// closed otherwise). It is for fds whose owner lets the Waiter keep them
// (a provider's own sockets, epoll sets and eventfds), which then cost no
// second fd; Stop unblocks waits without closing it.
func Adopt(fd int, name string, src Source, spin time.Duration) (*Waiter, error) {
	f, rc, err := adoptFile(fd, name)
	if err != nil {
		return nil, err
	}
	w := &Waiter{f: f, rc: rc, src: src, spin: spin, eagerDrain: eagerDrain.Load()}
	w.fn = w.step
	w.wk, _ = src.(woken)
	return w, nil
}

// EagerDrain reports whether w drains eagerly (SetEagerDrain was on when
// it was made); its Source's Drain should then read until EAGAIN too.
func (w *Waiter) EagerDrain() bool { return w.eagerDrain }

// dupFile dups fd, non-blocking, into an *os.File in the netpoller.
func dupFile(fd int, name string) (*os.File, syscall.RawConn, error) {
	nfd, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, nil, os.NewSyscallError("fcntl F_DUPFD_CLOEXEC", err)
	}
	if err := unix.SetNonblock(nfd, true); err != nil {
		unix.Close(nfd)
		return nil, nil, os.NewSyscallError("setnonblock", err)
	}
	return pollFile(nfd, name)
}

// pollFile puts the non-blocking fd into an *os.File in the netpoller.
// From here on the file owns fd: on failure it is closed.
func pollFile(fd int, name string) (*os.File, syscall.RawConn, error) {
	f := os.NewFile(uintptr(fd), name)
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("poller: %s: %w", name, err)
	}
	return f, rc, nil
}

// adoptFile is pollFile for an fd the caller hands over: on failure
// before the file owns it, fd is left open.
func adoptFile(fd int, name string) (*os.File, syscall.RawConn, error) {
	if err := unix.SetNonblock(fd, true); err != nil {
		return nil, nil, os.NewSyscallError("setnonblock", err)
	}
	return pollFile(fd, name)
}

// step is one round of the wake-up protocol; true ends the wait.
func (w *Waiter) step(uintptr) bool {
	if w.level {
		if w.slept {
			w.slept = false
			if w.wk != nil {
				w.wk.Woken()
			}
		}
		n, err := w.src.Poll()
		w.n, w.err = n, err
		if err == nil && n == 0 {
			w.slept = true
			return false
		}
		return true
	}
	if w.slept {
		// Woken: consume the events at once, so the channel is read dry
		// and the CQ known to be disarmed.
		w.slept = false
		ev, err := w.src.Drain()
		if err == nil && ev > 0 && w.eagerDrain {
			_, err = w.src.Drain() // the eager pattern's second read
		}
		if err != nil {
			w.err = err
			return true
		}
		if ev > 0 {
			w.armed = false
		}
	}
	for {
		n, err := w.src.Poll()
		if err != nil || n > 0 {
			w.n, w.err = n, err
			return true
		}
		if !w.armed {
			if err := w.src.Arm(); err != nil {
				w.err = err
				return true
			}
			w.armed, w.armedNow = true, true
			continue // poll once more after arming
		}
		if w.armedNow && w.nf == nil && !w.eagerDrain {
			// Armed inside this rc.Read, with the channel read dry
			// before (an event disarms the CQ, and every event was
			// drained before re-arming): an event from now on is an
			// edge the netpoller keeps for this Read. Sleep without
			// the read that would only say EAGAIN.
			w.slept = true
			return false
		}
		ev, err := w.src.Drain()
		if err != nil {
			w.err = err
			return true
		}
		if ev == 0 {
			w.slept = true
			return false // read dry: sleep in the netpoller
		}
		w.armed = false // an event disarms the CQ
	}
}

// Wait returns once Poll reported completions (their count), or with an
// error: os.ErrDeadlineExceeded when the deadline passes, net.ErrClosed
// after Close, or the Source's error.
//
// With a spin window it first polls for up to the window, and no longer
// than the deadline, Close, Stop or Wake: each is looked at between two
// polls, so a spinning wait ends within one Poll of them. A spin that
// finds nothing is worse than none: the CPU it held is often the one the
// peer's wake-up was queued on (Linux wakes a socket's reader on the
// sender's CPU), so a window shorter than the round trip delays the
// answer it waits for by the window. After spinMissesBeforeBackoff misses
// in a row the Waiter skips spinning for the next 1, 2, 4 ...
// 64 waits between tries, and a spin that finds work resets
// that: a window that usually pays keeps spinning, one that never does
// costs one spin in 64 waits.
func (w *Waiter) Wait() (int, error) {
	if w.closed.Load() {
		return 0, net.ErrClosed
	}
	if w.spin > 0 {
		if w.skip > 0 {
			w.skip--
		} else if n, err := w.spinPoll(); n > 0 || err != nil {
			return n, err
		}
	}
	for {
		w.n, w.err = 0, nil
		rc := w.rc
		if w.nf != nil && w.narrow.Narrow() {
			rc = w.nrc
		}
		// Only an arm after this Read's start makes its edge count for
		// this Read (internal/poll resets the fd's readiness when a Read
		// begins). A narrow fd does not show the CQ's events at all.
		w.armedNow = false
		err := rc.Read(w.fn)
		if err == nil {
			return w.n, w.err
		}
		w.slept = false
		if w.closed.Load() {
			return 0, net.ErrClosed
		}
		if errors.Is(err, os.ErrDeadlineExceeded) && w.unkick() {
			if w.woke.Swap(false) {
				return 0, nil // Wake: the caller acts, then waits again
			}
			continue // kicked: poll again
		}
		return 0, mapErr(err)
	}
}

// spinPoll polls for up to the spin window, and stops early at the
// deadline, Close, Stop or Wake (the sleep that follows returns for those
// at once); it returns what a poll found (n > 0 or an error), or 0, nil.
func (w *Waiter) spinPoll() (int, error) {
	start := time.Now()
	for t := start; t.Sub(start) < w.spin; t = time.Now() {
		// The window is timed on the monotonic clock; the deadline,
		// which may be set during the spin, is a wall-clock time, as
		// the netpoller's.
		if dl := w.spinDL.Load(); dl != 0 && t.UnixNano() >= dl {
			break
		}
		n, err := w.src.Poll()
		if err != nil || n > 0 {
			w.misses = 0
			return n, err
		}
		if w.closed.Load() || w.woke.Load() {
			return 0, nil
		}
	}
	w.misses++
	if k := w.misses - spinMissesBeforeBackoff; k >= 0 {
		w.skip = 1 << min(k, maxSpinBackoffShift)
	}
	return 0, nil
}

// kickDeadline is a deadline long past: setting it wakes a blocked wait.
var kickDeadline = time.Unix(1, 0)

// Kick makes a blocked Wait poll again, or the next Wait poll at once
// rather than sleep, without changing the deadline callers set: it sets
// a deadline long past on both fds, and the Wait that wakes from it puts
// the caller's back and polls. It is for completions the narrow fd does
// not show (SetNarrow). It may be called from any
// goroutine, also after Close.
func (w *Waiter) Kick() {
	w.dmu.Lock()
	defer w.dmu.Unlock()
	if w.kicked || w.closed.Load() {
		return
	}
	w.kicked = true
	w.setDeadlines(kickDeadline)
}

// Wake is Kick for the caller: the Wait that wakes from it, or else the
// next Wait that would sleep, returns (0, nil) instead of polling again.
func (w *Waiter) Wake() {
	w.woke.Store(true)
	w.Kick()
}

// setDeadlines sets the deadline of the fd and the narrow fd; w.dmu is
// held.
func (w *Waiter) setDeadlines(t time.Time) error {
	if w.nf != nil {
		if err := w.nf.SetReadDeadline(t); err != nil {
			return err
		}
	}
	return w.f.SetReadDeadline(t)
}

// Narrower says, before each sleep, whether to sleep on the narrow fd.
type Narrower interface{ Narrow() bool }

// SetNarrow gives the Waiter a second fd (dup'd, as New does): one that
// wakes a wait more cheaply than the first but does not show every
// completion. Before each sleep n says which to sleep on; while the wait
// sleeps on the narrow one, whoever knows of completions it cannot show
// must Kick. Call it before the first Wait.
func (w *Waiter) SetNarrow(fd int, n Narrower) error {
	f, rc, err := dupFile(fd, w.f.Name()+"-narrow")
	if err != nil {
		return err
	}
	w.nf, w.nrc, w.narrow = f, rc, n
	return nil
}

// AdoptNarrow is SetNarrow for an fd the Waiter takes over, as Adopt.
func (w *Waiter) AdoptNarrow(fd int, n Narrower) error {
	f, rc, err := adoptFile(fd, w.f.Name()+"-narrow")
	if err != nil {
		return err
	}
	w.nf, w.nrc, w.narrow = f, rc, n
	return nil
}

// unkick consumes a kick, putting the caller's deadline back; it reports
// whether there was one (else the deadline that passed was the caller's).
func (w *Waiter) unkick() bool {
	w.dmu.Lock()
	defer w.dmu.Unlock()
	if !w.kicked {
		return false
	}
	w.kicked = false
	if !w.stopped {
		w.setDeadlines(w.deadline)
	}
	return true
}

// SetLevelTriggered says that the channel fd is readable while Poll may
// find work (a software CQ whose channel is its sockets): then
// there is nothing to arm or drain, and Wait polls once before sleeping.
func (w *Waiter) SetLevelTriggered(on bool) { w.level = on }

// Armed reports whether the CQ is armed (a notification is pending).
func (w *Waiter) Armed() bool { return w.armed }

// SetDeadline sets the deadline for Wait; a zero time means none. It takes
// effect on a Wait already blocked.
func (w *Waiter) SetDeadline(t time.Time) error {
	w.dmu.Lock()
	defer w.dmu.Unlock()
	if w.stopped {
		return nil // the deadline stays in the past
	}
	w.deadline = t
	if t.IsZero() {
		w.spinDL.Store(0)
	} else {
		w.spinDL.Store(t.UnixNano())
	}
	if w.kicked {
		return nil // set when the kick is consumed
	}
	return mapErr(w.setDeadlines(t))
}

// Stop unblocks a blocked Wait with net.ErrClosed, and makes every later
// Wait return it, without closing the fds: for an adopted fd that its
// owner still uses until it destroys the object (Close then). It is
// idempotent and may be called from any goroutine.
func (w *Waiter) Stop() {
	w.dmu.Lock()
	defer w.dmu.Unlock()
	if w.closed.Swap(true) {
		return
	}
	w.stopped = true
	w.setDeadlines(kickDeadline)
}

// Close closes the Waiter's fds (the dups, or the adopted fds themselves)
// and unblocks a blocked Wait with net.ErrClosed. It does not touch the
// Source.
func (w *Waiter) Close() error {
	w.dmu.Lock()
	already := w.files
	w.files = true
	w.dmu.Unlock()
	w.closed.Store(true)
	if already {
		return nil
	}
	if w.nf != nil {
		w.nf.Close()
	}
	return mapErr(w.f.Close())
}

func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, os.ErrClosed):
		return net.ErrClosed
	case errors.Is(err, os.ErrDeadlineExceeded):
		return os.ErrDeadlineExceeded
	}
	return err
}
