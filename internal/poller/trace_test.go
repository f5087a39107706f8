//go:build linux

package poller

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// traceCQ is a fakeCQ that records the calls of the wake-up protocol in
// order (poll=N, arm, drain=N), so a test can assert the exact pattern a
// wait follows, and that can be told to misbehave once: post a
// completion right after an arm (its event then fires and waits in the
// channel for a later wait), or read the channel dry but report no event
// (a wake-up with nothing to consume).
type traceCQ struct {
	*fakeCQ
	mu          sync.Mutex
	calls       []string
	postOnArm   bool // the next Arm is followed by a completion (its event fires)
	swallowNext bool // the next Drain reads the channel but reports 0
}

func newTraceCQ(t *testing.T) *traceCQ { return &traceCQ{fakeCQ: newFakeCQ(t)} }

func (q *traceCQ) log(s string) {
	q.mu.Lock()
	q.calls = append(q.calls, s)
	q.mu.Unlock()
}

// errRunaway ends a wait that loops without sleeping (its Read could not
// be ended otherwise: Close waits for it), so that the test fails at
// once instead of hanging.
var errRunaway = errors.New("traceCQ: 1000 calls in a row without a take: the wait loops without sleeping")

func (q *traceCQ) Poll() (int, error) {
	n, err := q.fakeCQ.Poll()
	q.log(fmt.Sprintf("poll=%d", n))
	q.mu.Lock()
	runaway := len(q.calls) > 1000
	q.mu.Unlock()
	if runaway {
		return 0, errRunaway
	}
	return n, err
}

func (q *traceCQ) Arm() error {
	err := q.fakeCQ.Arm()
	q.log("arm")
	q.mu.Lock()
	post := q.postOnArm
	q.postOnArm = false
	q.mu.Unlock()
	if post {
		q.fakeCQ.post(1)
	}
	return err
}

func (q *traceCQ) Drain() (int, error) {
	n, err := q.fakeCQ.Drain()
	q.mu.Lock()
	if q.swallowNext {
		q.swallowNext, n = false, 0
	}
	q.mu.Unlock()
	q.log(fmt.Sprintf("drain=%d", n))
	return n, err
}

// take returns the calls recorded since the last take.
func (q *traceCQ) take() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := strings.Join(q.calls, " ")
	q.calls = nil
	return s
}

// await waits (bounded) until the calls recorded so far read want: the
// wait has made them and, when want ends a sleep's pattern, is asleep or
// about to be (an event from then on is an edge its Read keeps).
func (q *traceCQ) await(t *testing.T, want, what string) {
	t.Helper()
	q.awaitOneOf(t, what, want)
}

// awaitOneOf is await for calls that may read any of wants.
func (q *traceCQ) awaitOneOf(t *testing.T, what string, wants ...string) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for {
		q.mu.Lock()
		got := strings.Join(q.calls, " ")
		q.mu.Unlock()
		if slices.Contains(wants, got) {
			return
		}
		prefix := slices.ContainsFunc(wants, func(w string) bool { return strings.HasPrefix(w, got) })
		if !prefix || time.Now().After(deadline) {
			longest := slices.MaxFunc(wants, func(a, b string) int { return len(a) - len(b) })
			if len(got) > len(longest)+40 {
				got = got[:len(longest)+40] + "..."
			}
			t.Fatalf("%s: calls %q, want %q", what, got, wants)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// wake makes the channel fd readable without a completion.
func (q *traceCQ) wake() {
	var one = [8]byte{1}
	unix.Write(q.efd, one[:])
}

func newTraceWaiter(t *testing.T, q *traceCQ, eager bool) *Waiter {
	t.Helper()
	w, err := New(q.efd, "tracecq", q, 0)
	require.NoError(t, err)
	t.Cleanup(func() { w.Close() })
	w.eagerDrain = eager
	return w
}

// sleepThenPost runs a Wait, waits for it to make the calls asleep (its
// pattern up to the sleep), posts one completion, and checks that the
// Wait returns it having made the calls woken after the sleep.
func sleepThenPost(t *testing.T, q *traceCQ, w *Waiter, asleep, woken, what string) {
	t.Helper()
	res := waitAsync(w)
	q.await(t, asleep, what+": before the sleep")
	q.post(1)
	r := resultWithin(t, res, what)
	require.NoError(t, r.err, what)
	require.Equal(t, 1, r.n, what)
	require.Equal(t, asleep+" "+woken, q.take(), what)
}

// The wake-up protocol, call by call: poll, arm, poll again, sleep (the
// drain before it is skipped: the channel was read dry before the arm);
// woken, drain the event, poll.
func TestWakeUpPatternLazy(t *testing.T) {
	q := newTraceCQ(t)
	w := newTraceWaiter(t, q, false)
	for i := range 3 {
		sleepThenPost(t, q, w, "poll=0 arm poll=0", "drain=1 poll=1", fmt.Sprintf("round %d", i))
	}
}

// The eager pattern (SetEagerDrain): a drain before every sleep, and a second
// one after a drain that found an event.
func TestWakeUpPatternEager(t *testing.T) {
	q := newTraceCQ(t)
	w := newTraceWaiter(t, q, true)
	for i := range 3 {
		sleepThenPost(t, q, w, "poll=0 arm poll=0 drain=0", "drain=1 drain=0 poll=1", fmt.Sprintf("round %d", i))
	}
}

// A wake-up that finds no event leaves the CQ armed: the wait polls and
// sleeps again without arming (lazy: without draining, since it armed
// within the same Read; eager: after the drain before every sleep, and
// no second drain after one that found nothing).
func TestSpuriousWakeKeepsArm(t *testing.T) {
	for _, eager := range []bool{false, true} {
		t.Run(fmt.Sprintf("eager=%v", eager), func(t *testing.T) {
			q := newTraceCQ(t)
			w := newTraceWaiter(t, q, eager)
			asleep := "poll=0 arm poll=0"
			again := "drain=0 poll=0"
			if eager {
				asleep += " drain=0"
				again += " drain=0"
			}
			res := waitAsync(w)
			q.await(t, asleep, "before the sleep")
			q.mu.Lock()
			q.swallowNext = true
			q.mu.Unlock()
			q.wake()
			q.await(t, asleep+" "+again, "after a wake-up with no event")
			q.post(1) // the CQ is still armed: this raises an event
			r := resultWithin(t, res, "Wait after a wake-up with no event, then a completion")
			require.NoError(t, r.err)
			require.Equal(t, 1, r.n)
			woken := "drain=1 poll=1"
			if eager {
				woken = "drain=1 drain=0 poll=1"
			}
			require.Equal(t, asleep+" "+again+" "+woken, q.take())
		})
	}
}

// A completion that lands between the arm and the poll after it is
// returned at once, and its event stays in the channel with the CQ now
// disarmed. The next wait does not arm first: it polls, drains that
// event (armed within an earlier Read, the channel may hold one), and
// only then arms, polls and sleeps; the next completion wakes it. The
// runtime's poller may still hold the stale event's readiness (it saw the
// edge before the drain read it): the wait then wakes once at once, finds
// nothing and sleeps again without arming (drain=0 poll=0, as after any
// spurious wake), and the completion may land during that look (drain=0
// poll=1). Seen once in 300 runs under -race.
func TestStaleEventDrainedBeforeRearm(t *testing.T) {
	q := newTraceCQ(t)
	w := newTraceWaiter(t, q, false)
	q.mu.Lock()
	q.postOnArm = true
	q.mu.Unlock()
	n, err := waitWithin(t, w, "Wait with a completion right after the arm")
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, "poll=0 arm poll=1", q.take())
	require.True(t, w.Armed(), "the Waiter still counts the CQ armed (its event is pending)")

	const asleep = "poll=0 drain=1 poll=0 arm poll=0"
	res := waitAsync(w)
	q.awaitOneOf(t, "the wait after a stale event: before the sleep", asleep, asleep+" drain=0 poll=0")
	q.post(1)
	r := resultWithin(t, res, "the wait after a stale event")
	require.NoError(t, r.err)
	require.Equal(t, 1, r.n)
	require.Regexp(t, `^`+asleep+`( drain=0 poll=0)?( drain=1 poll=1| drain=0 poll=1)$`, q.take(),
		"drained before the arm, armed once, woken by the completion")
}
