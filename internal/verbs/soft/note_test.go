//go:build linux

package soft

import (
	"errors"
	"testing"
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
