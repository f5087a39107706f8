package reliable

import (
	"testing"
	"time"
)

// waitCond waits, bounded, until cond holds: a state another goroutine
// reaches (the reader parked, the conn handed over), read under the
// locks cond takes.
func waitCond(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after 10 s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}
