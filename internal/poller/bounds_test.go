//go:build linux

package poller

import (
	"sync/atomic"
	"testing"
	"time"
)

// waitBound is how long any one wait of these tests may take before it
// counts as a lost wake-up: far beyond what a loaded machine needs, far
// below the package's test timeout, so a lost wake-up fails in seconds
// and names the wait instead of hanging the binary.
const waitBound = 10 * time.Second

// watchdog bounds the waits on w between guard and done: when waitBound
// passes first, it stops w (a blocked Wait returns net.ErrClosed) and
// done fails the test, naming what waited.
type watchdog struct {
	t     testing.TB
	what  string
	timer *time.Timer
	fired atomic.Bool
}

func guard(t testing.TB, w *Waiter, what string) *watchdog {
	g := &watchdog{t: t, what: what}
	g.timer = time.AfterFunc(waitBound, func() {
		g.fired.Store(true)
		w.Stop()
	})
	return g
}

func (g *watchdog) done() {
	g.t.Helper()
	g.timer.Stop()
	if g.fired.Load() {
		g.t.Fatalf("%s: Wait did not return within %v (a lost wake-up)", g.what, waitBound)
	}
}

// waitWithin is w.Wait bounded by waitBound.
func waitWithin(t testing.TB, w *Waiter, what string) (int, error) {
	t.Helper()
	g := guard(t, w, what)
	n, err := w.Wait()
	g.done()
	return n, err
}

// resultWithin receives a waitAsync result, bounded by waitBound.
func resultWithin(t testing.TB, res <-chan waitResult, what string) waitResult {
	t.Helper()
	select {
	case r := <-res:
		return r
	case <-time.After(waitBound):
		t.Fatalf("%s: Wait did not return within %v (a lost wake-up)", what, waitBound)
		return waitResult{}
	}
}
