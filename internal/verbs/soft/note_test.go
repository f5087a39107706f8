//go:build linux

package soft

import (
	"errors"
	"testing"
	"time"
)

// A note wait whose arm fails returns 0 with the error: a caller such as
// rdmanet's reapUntil takes the count's completions before it looks at
// the error, so a count with it would have it read completions that were
// never polled.
func TestNoteWaitArmErrorCountsNone(t *testing.T) {
	armErr := errors.New("arm failed")
	polls := 0
	var w noteWaiter
	w.init(func() (int, error) { polls++; return 0, nil }, func() error { return armErr })
	n, err := w.wait()
	if !errors.Is(err, armErr) || n != 0 {
		t.Fatalf("wait = %d, %v; want 0, %v", n, err, armErr)
	}
	if polls != 1 {
		t.Errorf("%d polls before the arm failed, want 1", polls)
	}
}

// A note left after the wait armed but before it slept (the producer's
// completion between the second poll and the sleep) is kept, and ends the
// sleep at once: the wait polls again and returns the completion. The
// note channel has one slot; with none, that note would be dropped (no
// one receiving yet) and the wait, with no deadline, would sleep on.
func TestNoteLeftBeforeSleepKept(t *testing.T) {
	var w noteWaiter
	polls := 0
	w.init(func() (int, error) {
		polls++
		switch polls {
		case 2: // after the arm: the producer completes now, and leaves
			// its note after this look, before the sleep
			defer w.notify()
			return 0, nil
		case 3:
			return 1, nil
		}
		return 0, nil
	}, func() error { return nil })
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := w.wait()
		done <- result{n, err}
	}()
	select {
	case r := <-done:
		if r.n != 1 || r.err != nil {
			t.Fatalf("wait = %d, %v; want 1, nil", r.n, r.err)
		}
	case <-time.After(10 * time.Second):
		w.close() // ends the sleep: the goroutine returns
		t.Fatal("the wait slept on after a note left before its sleep (10 s)")
	}
}

// notify keeps at most one note (note.go): notes left while no wait
// sleeps end the next sleep once, so a wait after many costs one more
// round of poll, arm and poll, not one a note; none is left after it.
func TestNoteKeepsOne(t *testing.T) {
	var w noteWaiter
	polls := 0
	w.init(func() (int, error) {
		polls++
		if polls == 3 { // after the sleep the note ended
			return 1, nil
		}
		return 0, nil
	}, func() error { return nil })
	for range 3 {
		w.notify()
	}
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := w.wait() // poll, arm, poll, sleep (a note: at once), poll
		done <- result{n, err}
	}()
	select {
	case r := <-done:
		if r.n != 1 || r.err != nil || polls != 3 {
			t.Fatalf("wait after three notes: %d, %v after %d polls; want 1, nil after 3", r.n, r.err, polls)
		}
	case <-time.After(10 * time.Second):
		w.close()
		t.Fatal("the wait slept on with notes left before it")
	}
	if left := len(w.note); left != 0 {
		t.Errorf("%d notes left after a wait took one, want 0", left)
	}
}
