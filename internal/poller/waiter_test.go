//go:build linux

package poller

import (
	"errors"
	"net"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// fakeCQ models a CQ with a completion channel on an eventfd: post adds a
// completion and, when armed, raises one channel event (as a CQ does).
type fakeCQ struct {
	mu      sync.Mutex
	efd     int
	pending int
	armed   bool
	polls   atomic.Int64
	arms    atomic.Int64
	// pollsAtArm is polls when Arm was last called.
	pollsAtArm atomic.Int64
	acked      atomic.Int64
	drains     atomic.Int64
	// raceOnArm posts a completion right after arming without raising an
	// event, modelling a completion that lands between the last poll and
	// the arm.
	raceOnArm atomic.Bool
}

func newFakeCQ(t testing.TB) *fakeCQ {
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(efd) })
	return &fakeCQ{efd: efd}
}

func (q *fakeCQ) post(n int) {
	q.mu.Lock()
	q.pending += n
	fire := q.armed
	q.armed = false
	q.mu.Unlock()
	if fire {
		var one = [8]byte{1}
		unix.Write(q.efd, one[:])
	}
}

func (q *fakeCQ) Poll() (int, error) {
	q.polls.Add(1)
	q.mu.Lock()
	defer q.mu.Unlock()
	n := q.pending
	q.pending = 0
	return n, nil
}

func (q *fakeCQ) Arm() error {
	q.arms.Add(1)
	q.pollsAtArm.Store(q.polls.Load())
	q.mu.Lock()
	q.armed = true
	if q.raceOnArm.Swap(false) {
		q.pending++ // completion present, but no event will be raised
		q.armed = false
	}
	q.mu.Unlock()
	return nil
}

func (q *fakeCQ) Drain() (int, error) {
	q.drains.Add(1)
	var b [8]byte
	_, err := unix.Read(q.efd, b[:])
	if err == unix.EAGAIN {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := int(b[0]) | int(b[1])<<8
	q.acked.Add(int64(n))
	return n, nil
}

func newWaiter(t testing.TB, q *fakeCQ, spin time.Duration) *Waiter {
	w, err := New(q.efd, "fakecq", q, spin)
	require.NoError(t, err)
	t.Cleanup(func() { w.Close() })
	return w
}

func TestWaitReturnsAtOnceWhenCompletionsPending(t *testing.T) {
	q := newFakeCQ(t)
	w := newWaiter(t, q, 0)
	q.post(3)
	n, err := waitWithin(t, w, "Wait with 3 completions pending")
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.Zero(t, q.arms.Load(), "a pending completion must not arm the CQ")
}

func TestWaitBlocksUntilCompletion(t *testing.T) {
	q := newFakeCQ(t)
	w := newWaiter(t, q, 0)
	done := make(chan int)
	go func() {
		n, err := w.Wait()
		if err != nil {
			n = -1
		}
		done <- n
	}()
	select {
	case n := <-done:
		t.Fatalf("Wait returned %d before any completion", n)
	case <-time.After(50 * time.Millisecond):
	}
	q.post(1)
	select {
	case n := <-done:
		require.Equal(t, 1, n)
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not wake after a completion")
	}
	require.Equal(t, int64(1), q.acked.Load(), "the channel event must be drained")
}

func TestArmThenPollCatchesRacingCompletion(t *testing.T) {
	q := newFakeCQ(t)
	w := newWaiter(t, q, 0)
	q.raceOnArm.Store(true)
	w.SetDeadline(time.Now().Add(2 * time.Second))
	n, err := waitWithin(t, w, "Wait for a completion that raced the arm")
	require.NoError(t, err, "a completion that raced the arm was missed")
	require.Equal(t, 1, n)
}

func TestWaitDeadline(t *testing.T) {
	q := newFakeCQ(t)
	w := newWaiter(t, q, 0)
	require.NoError(t, w.SetDeadline(time.Now().Add(-time.Second)))
	start := time.Now()
	_, err := waitWithin(t, w, "Wait with a past deadline")
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	require.Less(t, time.Since(start), time.Second)

	// Moving the deadline while blocked takes effect.
	require.NoError(t, w.SetDeadline(time.Time{}))
	errc := make(chan error)
	go func() { _, err := w.Wait(); errc <- err }()
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, w.SetDeadline(time.Now().Add(10*time.Millisecond)))
	select {
	case err := <-errc:
		require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	case <-time.After(5 * time.Second):
		t.Fatal("moving the deadline did not unblock Wait")
	}
}

func TestCloseUnblocksWait(t *testing.T) {
	q := newFakeCQ(t)
	w, err := New(q.efd, "fakecq", q, 0)
	require.NoError(t, err)
	errc := make(chan error)
	go func() { _, err := w.Wait(); errc <- err }()
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, w.Close())
	select {
	case err := <-errc:
		require.True(t, errors.Is(err, net.ErrClosed), "got %v, want net.ErrClosed", err)
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not unblock Wait")
	}
	_, err = waitWithin(t, w, "Wait after Close")
	require.ErrorIs(t, err, net.ErrClosed)
	// The original fd is untouched: the Waiter owned a dup.
	_, err = unix.FcntlInt(uintptr(q.efd), unix.F_GETFD, 0)
	require.NoError(t, err)
}

func TestSpinWindowFindsCompletionWithoutArming(t *testing.T) {
	q := newFakeCQ(t)
	w := newWaiter(t, q, 200*time.Millisecond)
	go func() {
		time.Sleep(time.Millisecond)
		q.mu.Lock()
		q.pending++
		q.mu.Unlock()
	}()
	n, err := waitWithin(t, w, "Wait with a completion inside the spin window")
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Zero(t, q.arms.Load(), "spin found the completion; the CQ must not be armed")
}

func TestWaitAllocatesNothing(t *testing.T) {
	q := newFakeCQ(t)
	w := newWaiter(t, q, 0)
	g := guard(t, w, "the 1000 waits of AllocsPerRun, each with a completion posted")
	allocs := testing.AllocsPerRun(1000, func() {
		q.post(1)
		if _, err := w.Wait(); err != nil {
			g.done()
			t.Fatal(err)
		}
	})
	g.done()
	require.Zero(t, allocs)
}

// 1000 goroutines each blocked in Wait must not hold 1000 OS threads.
func TestBlockedWaitersHoldNoThreads(t *testing.T) {
	const n = 1000
	ws := make([]*Waiter, n)
	qs := make([]*fakeCQ, n)
	for i := range ws {
		qs[i] = newFakeCQ(t)
		ws[i] = newWaiter(t, qs[i], 0)
	}
	var wg sync.WaitGroup
	for i := range ws {
		wg.Add(1)
		go func(w *Waiter) { defer wg.Done(); w.Wait() }(ws[i])
	}
	time.Sleep(200 * time.Millisecond)
	threads := pprof.Lookup("threadcreate").Count()
	limit := runtime.GOMAXPROCS(0) + 8
	// threadcreate counts threads ever created, an upper bound of those alive.
	require.LessOrEqual(t, threads, limit+2, "threads created with %d blocked waiters", n)
	for i := range qs {
		qs[i].post(1)
	}
	all := make(chan struct{})
	go func() { wg.Wait(); close(all) }()
	select {
	case <-all:
	case <-time.After(waitBound):
		t.Fatalf("%d waiters, each posted a completion: not all woke within %v (a lost wake-up)", n, waitBound)
	}
}

// pipeSource is level-triggered: the pipe is readable exactly while Poll
// has work, as with the software backend's sockets.
type pipeSource struct {
	r, w  int
	polls atomic.Int64
}

func (p *pipeSource) Poll() (int, error) {
	defer p.polls.Add(1) // counted once the read is done
	var b [64]byte
	n, err := unix.Read(p.r, b[:])
	if err == unix.EAGAIN {
		return 0, nil
	}
	return n, err
}
func (p *pipeSource) Arm() error          { panic("a level-triggered source is never armed") }
func (p *pipeSource) Drain() (int, error) { panic("a level-triggered source is never drained") }

// newPipe is a non-blocking pipe, closed when the test ends.
func newPipe(t *testing.T) (r, w int) {
	t.Helper()
	var fds [2]int
	require.NoError(t, unix.Pipe2(fds[:], unix.O_NONBLOCK|unix.O_CLOEXEC))
	t.Cleanup(func() { unix.Close(fds[0]); unix.Close(fds[1]) })
	return fds[0], fds[1]
}

// newLevelWaiter is a level-triggered Waiter for src on fd, closed when
// the test ends.
func newLevelWaiter(t *testing.T, fd int, name string, src Source) *Waiter {
	t.Helper()
	w, err := New(fd, name, src, 0)
	require.NoError(t, err)
	t.Cleanup(func() { w.Close() })
	w.SetLevelTriggered(true)
	return w
}

func TestLevelTriggeredPollsOnceBeforeSleeping(t *testing.T) {
	src := &pipeSource{}
	src.r, src.w = newPipe(t)
	w := newLevelWaiter(t, src.r, "pipe", src)
	res := waitAsync(w)
	// Written once the first poll found the pipe empty: the wait sleeps
	// (or is about to), and the write wakes it.
	require.Eventually(t, func() bool { return src.polls.Load() == 1 }, waitBound, 100*time.Microsecond, "the wait never polled")
	unix.Write(src.w, []byte("abc"))
	r := resultWithin(t, res, "level-triggered Wait for a pipe written after its first poll")
	require.NoError(t, r.err)
	require.Equal(t, 3, r.n)
	require.Equal(t, int64(2), src.polls.Load(), "one poll before sleeping, one after waking")
}

// A spin window that keeps missing (work comes later than the window) is
// skipped after 4 misses in a row, for 1, 2, 4 ... 64 waits between
// tries; a spin that finds work resets the back-off.
func TestSpinBacksOffWhenItMisses(t *testing.T) {
	q := newFakeCQ(t)
	w := newWaiter(t, q, 50*time.Microsecond)
	// spun reports whether a Wait spun: a Wait that does not spin polls
	// once before it arms the CQ, one that spins at least twice (however
	// slow the machine: the spin polls at least once).
	late := func() (spun bool) {
		before, arms := q.polls.Load(), q.arms.Load()
		go func() {
			// After the window: once the Wait armed the CQ (a post
			// timed 2 ms after the Wait began met a spin the VM had
			// held up past it).
			for q.arms.Load() == arms {
				time.Sleep(20 * time.Microsecond)
			}
			q.post(1)
		}()
		n, err := waitWithin(t, w, "Wait for a completion posted once it armed the CQ")
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, arms+1, q.arms.Load(), "armed once, then slept")
		return q.pollsAtArm.Load()-before >= 2
	}
	var pattern []bool
	for range 18 {
		pattern = append(pattern, late())
	}
	// 4 misses, skip 1, spin, skip 2, spin, skip 4, spin, skip 2 more...
	want := []bool{true, true, true, true, false, true, false, false, true, false, false, false, false, true, false, false, false, false}
	require.Equal(t, want, pattern)

	// Work within the window: the spin finds it and the back-off resets.
	for w.skip > 0 {
		late()
	}
	q.post(1)
	n, err := waitWithin(t, w, "Wait with a completion pending, after the back-off")
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Zero(t, w.misses, "a hit resets the back-off")
	for range 4 {
		require.True(t, late(), "after a hit the next 4 misses spin again")
	}
	require.False(t, late())
}

// silentCQ is a level-triggered source whose completions never make its
// fd readable (a socket the fd does not cover): only Kick wakes a waiter.
type silentCQ struct {
	r, w    int // a pipe nobody writes
	pending atomic.Int64
	polls   atomic.Int64
}

func (s *silentCQ) Poll() (int, error) {
	s.polls.Add(1)
	return int(s.pending.Swap(0)), nil
}
func (s *silentCQ) Arm() error          { panic("level-triggered") }
func (s *silentCQ) Drain() (int, error) { panic("level-triggered") }

func newSilentWaiter(t *testing.T) (*silentCQ, *Waiter) {
	t.Helper()
	s := &silentCQ{}
	s.r, s.w = newPipe(t)
	return s, newLevelWaiter(t, s.r, "silent", s)
}

type waitResult struct {
	n   int
	err error
	at  time.Duration
}

func waitAsync(w *Waiter) <-chan waitResult {
	ch := make(chan waitResult, 1)
	start := time.Now()
	go func() {
		n, err := w.Wait()
		ch <- waitResult{n, err, time.Since(start)}
	}()
	return ch
}

func TestKickWakesBlockedWait(t *testing.T) {
	s, w := newSilentWaiter(t)
	res := waitAsync(w)
	expectBlocked(t, res, 50*time.Millisecond, "before anything happened")
	s.pending.Add(2) // the fd does not show it
	expectBlocked(t, res, 50*time.Millisecond, "without a kick")
	w.Kick()
	expectWoken(t, res, 2, "Kick did not wake Wait")
}

// A kick that finds nothing leaves the caller's deadline as it was: the
// wait sleeps on and times out at the deadline, not at the kick.
func TestKickKeepsDeadline(t *testing.T) {
	_, w := newSilentWaiter(t)
	require.NoError(t, w.SetDeadline(time.Now().Add(300*time.Millisecond)))
	res := waitAsync(w)
	time.Sleep(50 * time.Millisecond)
	w.Kick()
	r := resultWithin(t, res, "kicked Wait with a 300 ms deadline")
	require.ErrorIs(t, r.err, os.ErrDeadlineExceeded)
	require.GreaterOrEqual(t, r.at, 250*time.Millisecond, "returned at the kick, not at the deadline")
	require.Less(t, r.at, 3*time.Second)
}

// A kick with no wait blocked is kept for the next Wait, and a deadline
// set meanwhile is the one that Wait then keeps.
func TestKickBeforeWaitAndDeadlineSetWhileKicked(t *testing.T) {
	s, w := newSilentWaiter(t)
	w.Kick()
	require.NoError(t, w.SetDeadline(time.Now().Add(200*time.Millisecond)))
	pollsBefore := s.polls.Load()
	r := resultWithin(t, waitAsync(w), "Wait after a kick, with a 200 ms deadline set while kicked")
	require.ErrorIs(t, r.err, os.ErrDeadlineExceeded)
	require.GreaterOrEqual(t, r.at, 150*time.Millisecond, "the deadline set while kicked was lost")
	require.Equal(t, int64(1), s.polls.Load()-pollsBefore, "one poll before sleeping to the deadline")

	// Clearing the deadline works as usual afterwards.
	require.NoError(t, w.SetDeadline(time.Time{}))
	res := waitAsync(w)
	s.pending.Add(1)
	w.Kick()
	expectWoken(t, res, 1, "Kick did not wake Wait")
}

// A deadline already past wins over a kick, as it does over data.
func TestKickWithPastDeadline(t *testing.T) {
	s, w := newSilentWaiter(t)
	require.NoError(t, w.SetDeadline(time.Now().Add(-time.Second)))
	s.pending.Add(1)
	w.Kick()
	_, err := waitWithin(t, w, "kicked Wait with a past deadline")
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
}

func TestKickAfterClose(t *testing.T) {
	_, w := newSilentWaiter(t)
	res := waitAsync(w)
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, w.Close())
	require.ErrorIs(t, resultWithin(t, res, "Wait blocked at Close").err, net.ErrClosed)
	w.Kick() // no panic, no effect
	_, err := waitWithin(t, w, "Wait after Close and a kick")
	require.ErrorIs(t, err, net.ErrClosed)
}

// twoPipes is a level-triggered source over two pipes, the wide one
// (the Waiter's fd) and the narrow one (SetNarrow's); Poll reads both.
type twoPipes struct {
	wide, narrow [2]int
	sleepNarrow  atomic.Bool
}

func (p *twoPipes) Poll() (int, error) {
	var b [64]byte
	total := 0
	for _, fd := range []int{p.wide[0], p.narrow[0]} {
		if n, err := unix.Read(fd, b[:]); err == nil {
			total += n
		}
	}
	return total, nil
}
func (p *twoPipes) Arm() error          { panic("level-triggered") }
func (p *twoPipes) Drain() (int, error) { panic("level-triggered") }
func (p *twoPipes) Narrow() bool        { return p.sleepNarrow.Load() }

func newTwoPipes(t *testing.T) (*twoPipes, *Waiter) {
	t.Helper()
	p := &twoPipes{}
	p.wide[0], p.wide[1] = newPipe(t)
	p.narrow[0], p.narrow[1] = newPipe(t)
	w := newLevelWaiter(t, p.wide[0], "wide", p)
	require.NoError(t, w.SetNarrow(p.narrow[0], p))
	return p, w
}

func expectBlocked(t *testing.T, res <-chan waitResult, d time.Duration, why string) {
	t.Helper()
	select {
	case r := <-res:
		t.Fatalf("Wait returned %+v: %s", r, why)
	case <-time.After(d):
	}
}

func expectWoken(t *testing.T, res <-chan waitResult, n int, why string) {
	t.Helper()
	select {
	case r := <-res:
		require.NoError(t, r.err)
		require.Equal(t, n, r.n)
	case <-time.After(5 * time.Second):
		t.Fatal(why)
	}
}

// Each wait sleeps on the fd Narrow picks: asleep on the narrow fd it does
// not see the wide one (a kick brings it back), asleep on the wide fd it
// does; deadlines and Close apply to both.
func TestNarrowFdChosenPerWait(t *testing.T) {
	p, w := newTwoPipes(t)

	p.sleepNarrow.Store(true)
	res := waitAsync(w)
	expectBlocked(t, res, 50*time.Millisecond, "nothing written")
	unix.Write(p.narrow[1], []byte("ab"))
	expectWoken(t, res, 2, "the narrow fd did not wake a narrow sleep")

	res = waitAsync(w)
	time.Sleep(20 * time.Millisecond)
	unix.Write(p.wide[1], []byte("abc"))
	expectBlocked(t, res, 100*time.Millisecond, "a narrow sleep saw the wide fd")
	w.Kick()
	expectWoken(t, res, 3, "a kick did not wake a narrow sleep")

	p.sleepNarrow.Store(false)
	res = waitAsync(w)
	time.Sleep(20 * time.Millisecond)
	unix.Write(p.wide[1], []byte("abcd"))
	expectWoken(t, res, 4, "the wide fd did not wake a wide sleep")

	// A deadline ends a narrow sleep too, at the deadline.
	p.sleepNarrow.Store(true)
	require.NoError(t, w.SetDeadline(time.Now().Add(150*time.Millisecond)))
	r := resultWithin(t, waitAsync(w), "narrow Wait with a 150 ms deadline")
	require.ErrorIs(t, r.err, os.ErrDeadlineExceeded)
	require.GreaterOrEqual(t, r.at, 100*time.Millisecond)
	require.NoError(t, w.SetDeadline(time.Time{}))

	// And a wide sleep of a Waiter with a narrow fd, at the deadline.
	p.sleepNarrow.Store(false)
	require.NoError(t, w.SetDeadline(time.Now().Add(150*time.Millisecond)))
	r = resultWithin(t, waitAsync(w), "wide Wait (narrow fd set) with a 150 ms deadline")
	require.ErrorIs(t, r.err, os.ErrDeadlineExceeded)
	require.GreaterOrEqual(t, r.at, 100*time.Millisecond)
	require.NoError(t, w.SetDeadline(time.Time{}))
	p.sleepNarrow.Store(true)

	// Close ends a narrow sleep.
	res = waitAsync(w)
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, w.Close())
	select {
	case r := <-res:
		require.ErrorIs(t, r.err, net.ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end a narrow sleep")
	}
}

// Wake ends a blocked Wait with (0, nil), once: the next Wait sleeps
// again, and the caller's deadline still holds. Stop ends every Wait with
// net.ErrClosed without closing the fd.
func TestWakeAndStop(t *testing.T) {
	_, w := newSilentWaiter(t)
	res := waitAsync(w)
	expectBlocked(t, res, 50*time.Millisecond, "before Wake")
	w.Wake()
	r := resultWithin(t, res, "Wait blocked at Wake")
	require.NoError(t, r.err)
	require.Zero(t, r.n, "completions after a Wake with none")

	require.NoError(t, w.SetDeadline(time.Now().Add(150*time.Millisecond)))
	r = resultWithin(t, waitAsync(w), "the Wait after a Wake, with a 150 ms deadline")
	require.ErrorIs(t, r.err, os.ErrDeadlineExceeded, "the Wait after a Wake")
	require.GreaterOrEqual(t, r.at, 100*time.Millisecond)
	require.NoError(t, w.SetDeadline(time.Time{}))

	res = waitAsync(w)
	expectBlocked(t, res, 50*time.Millisecond, "before Stop")
	w.Stop()
	require.ErrorIs(t, resultWithin(t, res, "Wait blocked at Stop").err, net.ErrClosed)
	_, err := waitWithin(t, w, "Wait after Stop")
	require.ErrorIs(t, err, net.ErrClosed)
	require.NoError(t, w.SetDeadline(time.Time{}), "SetDeadline after Stop")
	_, err = waitWithin(t, w, "Wait after Stop and a cleared deadline")
	require.ErrorIs(t, err, net.ErrClosed, "a deadline cleared after Stop")
	require.NoError(t, w.Close())
}
