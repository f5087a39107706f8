//go:build linux

package soft

import (
	"net"
	"os"
	"sync"
	"time"
)

// noteWaiter is a wait for completions or events that this process
// raises itself, in Go: it polls, arms (the producer then leaves a note
// for the next one) and polls again, then sleeps on the note, a Go
// channel of one slot, until the note, its deadline (a timer), Wake or
// close. It holds no fd.
type noteWaiter struct {
	poll func() (int, error)
	arm  func() error
	note chan struct{}

	mu       sync.Mutex
	deadline time.Time
	woke     bool
	closed   bool
	timer    *time.Timer // made at the first wait with a deadline
}

func (w *noteWaiter) init(poll func() (int, error), arm func() error) {
	w.poll, w.arm = poll, arm
	w.note = make(chan struct{}, 1)
}

// notify leaves the note (at most one is kept); any goroutine may call it.
func (w *noteWaiter) notify() {
	select {
	case w.note <- struct{}{}:
	default:
	}
}

// wait returns once poll found something (its count), with (0, nil) after
// wake, os.ErrDeadlineExceeded once the deadline passed, or net.ErrClosed
// after close.
func (w *noteWaiter) wait() (int, error) {
	for {
		w.mu.Lock()
		closed := w.closed
		w.mu.Unlock()
		if closed {
			return 0, net.ErrClosed
		}
		if n, err := w.poll(); err != nil || n > 0 {
			return n, err
		}
		if err := w.arm(); err != nil {
			return 0, err
		}
		if n, err := w.poll(); err != nil || n > 0 { // arm, then poll once more
			return n, err
		}
		if err := w.sleep(); err != nil {
			return 0, err
		}
		w.mu.Lock()
		woke := w.woke
		w.woke = false
		w.mu.Unlock()
		if woke {
			return 0, nil
		}
	}
}

// sleep waits for the note or the deadline; a note left before it began
// ends it at once, so nothing set since the last look is missed.
func (w *noteWaiter) sleep() error {
	w.mu.Lock()
	closed, woke, dl := w.closed, w.woke, w.deadline
	w.mu.Unlock()
	switch {
	case closed:
		return net.ErrClosed
	case woke:
		return nil
	case dl.IsZero():
		<-w.note
		return nil
	}
	d := time.Until(dl)
	if d <= 0 {
		return os.ErrDeadlineExceeded
	}
	if w.timer == nil {
		w.timer = time.NewTimer(d)
	} else {
		w.timer.Reset(d)
	}
	select {
	case <-w.note:
	case <-w.timer.C:
	}
	w.timer.Stop()
	return nil
}

func (w *noteWaiter) setDeadline(t time.Time) {
	w.mu.Lock()
	w.deadline = t
	w.mu.Unlock()
	w.notify()
}

func (w *noteWaiter) wake() {
	w.mu.Lock()
	w.woke = true
	w.mu.Unlock()
	w.notify()
}

func (w *noteWaiter) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.notify()
}
