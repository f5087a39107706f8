//go:build linux

package poller

import (
	"errors"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// badFd is an fd number no process has open (far above any fd limit):
// every call on it fails with EBADF.
const badFd = 1 << 30

// requireSyscallErr asserts that err is an *os.SyscallError of call.
func requireSyscallErr(t *testing.T, err error, call string) {
	t.Helper()
	var se *os.SyscallError
	require.True(t, errors.As(err, &se), "got %v, want an *os.SyscallError of %s", err, call)
	require.Equal(t, call, se.Syscall)
	require.ErrorIs(t, err, unix.EBADF)
}

// New, Adopt, SetNarrow and AdoptNarrow on an fd that is not open fail
// with the call that failed, and leave nothing set.
func TestBadFdsFail(t *testing.T) {
	q := newFakeCQ(t)
	const bad = badFd

	w, err := New(bad, "bad", q, 0)
	require.Nil(t, w)
	requireSyscallErr(t, err, "fcntl F_DUPFD_CLOEXEC")

	w, err = Adopt(bad, "bad", q, 0)
	require.Nil(t, w)
	requireSyscallErr(t, err, "setnonblock")

	p := &twoPipes{}
	w = newWaiter(t, q, 0)
	requireSyscallErr(t, w.SetNarrow(bad, p), "fcntl F_DUPFD_CLOEXEC")
	require.Nil(t, w.nf, "a failed SetNarrow set a narrow fd")
	requireSyscallErr(t, w.AdoptNarrow(bad, p), "setnonblock")
	require.Nil(t, w.nf, "a failed AdoptNarrow set a narrow fd")
}

// AdoptNarrow takes the fd itself: asleep on it the wait wakes when it
// becomes readable, and Close closes it.
func TestAdoptNarrow(t *testing.T) {
	p := &twoPipes{}
	p.wide[0], p.wide[1] = newPipe(t)
	p.narrow[0], p.narrow[1] = newPipe(t)
	w := newLevelWaiter(t, p.wide[0], "wide", p)
	nfd, err := unix.Dup(p.narrow[0])
	require.NoError(t, err)
	require.NoError(t, w.AdoptNarrow(nfd, p))
	require.NotNil(t, w.nf)
	require.Equal(t, uintptr(nfd), w.nf.Fd(), "AdoptNarrow took a dup, not the fd")

	p.sleepNarrow.Store(true)
	res := waitAsync(w)
	expectBlocked(t, res, 20*time.Millisecond, "nothing written")
	unix.Write(p.narrow[1], []byte("ab"))
	expectWoken(t, res, 2, "the adopted narrow fd did not wake a narrow sleep")

	require.NoError(t, w.Close())
	_, err = unix.FcntlInt(uintptr(nfd), unix.F_GETFD, 0)
	require.ErrorIs(t, err, unix.EBADF, "Close left the adopted narrow fd open")
}

// Close closes the narrow fd (SetNarrow's dup) too.
func TestCloseClosesNarrowFd(t *testing.T) {
	_, w := newTwoPipes(t)
	nf := w.nf
	require.NoError(t, w.Close())
	_, err := nf.Stat()
	require.ErrorIs(t, err, os.ErrClosed, "Close left the narrow fd open")
}

// errCQ is a fakeCQ whose calls fail where told to.
type errCQ struct {
	*fakeCQ
	pollErr, armErr, drainErr atomic.Pointer[error]
}

func (q *errCQ) Poll() (int, error) {
	if e := q.pollErr.Load(); e != nil {
		return 0, *e
	}
	return q.fakeCQ.Poll()
}

func (q *errCQ) Arm() error {
	if e := q.armErr.Load(); e != nil {
		return *e
	}
	return q.fakeCQ.Arm()
}

func (q *errCQ) Drain() (int, error) {
	if e := q.drainErr.Load(); e != nil {
		return 0, *e
	}
	return q.fakeCQ.Drain()
}

var errSource = errors.New("source failed")

// A Source's error ends the wait with it, and no count, wherever the
// protocol meets it: the poll, the arm, the drain before a sleep (eager,
// or a stale event's) and the drain after a wake-up.
func TestSourceErrorsEndWait(t *testing.T) {
	setup := func(t *testing.T, eager bool) (*errCQ, *Waiter) {
		q := &errCQ{fakeCQ: newFakeCQ(t)}
		w, err := New(q.efd, "errcq", q, 0)
		require.NoError(t, err)
		t.Cleanup(func() { w.Close() })
		w.eagerDrain = eager
		return q, w
	}
	expectErr := func(t *testing.T, w *Waiter, what string) {
		t.Helper()
		n, err := waitWithin(t, w, what)
		require.ErrorIs(t, err, errSource, what)
		require.Zero(t, n, what)
	}
	fail := &errSource

	t.Run("poll", func(t *testing.T) {
		q, w := setup(t, false)
		q.pollErr.Store(fail)
		expectErr(t, w, "Wait whose poll fails")
	})
	t.Run("arm", func(t *testing.T) {
		q, w := setup(t, false)
		q.armErr.Store(fail)
		expectErr(t, w, "Wait whose arm fails")
	})
	t.Run("drain before sleep", func(t *testing.T) {
		q, w := setup(t, true)
		q.drainErr.Store(fail)
		expectErr(t, w, "eager Wait whose drain before the sleep fails")
	})
	t.Run("drain of a stale event", func(t *testing.T) {
		q, w := setup(t, false)
		// Armed by a wait that then found a completion: the next wait
		// drains before it sleeps.
		q.raceOnArm.Store(true)
		n, err := waitWithin(t, w, "Wait with a completion racing the arm")
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.True(t, w.Armed())
		q.drainErr.Store(fail)
		expectErr(t, w, "Wait whose drain of a stale event fails")
	})
	t.Run("drain after wake", func(t *testing.T) {
		q, w := setup(t, false)
		res := waitAsync(w)
		require.Eventually(t, func() bool { return q.arms.Load() == 1 }, waitBound, 100*time.Microsecond, "the wait never armed")
		q.drainErr.Store(fail)
		q.post(1)
		r := resultWithin(t, res, "Wait whose drain after the wake-up fails")
		require.ErrorIs(t, r.err, errSource)
		require.Zero(t, r.n)
	})
}

// Waits that end without completions report none: at a deadline, at
// Close, after Close.
func TestWaitsEndingWithoutCompletionsCountNone(t *testing.T) {
	q := newFakeCQ(t)
	w, err := New(q.efd, "fakecq", q, 0)
	require.NoError(t, err)
	require.NoError(t, w.SetDeadline(time.Now().Add(20*time.Millisecond)))
	r := resultWithin(t, waitAsync(w), "Wait with a 20 ms deadline")
	require.ErrorIs(t, r.err, os.ErrDeadlineExceeded)
	require.Zero(t, r.n, "completions at a deadline")
	require.NoError(t, w.Close())

	q = newFakeCQ(t)
	w, err = New(q.efd, "fakecq", q, 0)
	require.NoError(t, err)
	res := waitAsync(w)
	require.Eventually(t, func() bool { return q.arms.Load() == 1 }, waitBound, 100*time.Microsecond, "the wait never armed")
	require.NoError(t, w.Close())
	r = resultWithin(t, res, "Wait blocked at Close")
	require.ErrorIs(t, r.err, net.ErrClosed)
	require.Zero(t, r.n, "completions at Close")

	q.post(1)
	n, err := w.Wait()
	require.ErrorIs(t, err, net.ErrClosed)
	require.Zero(t, n, "completions after Close")
}
