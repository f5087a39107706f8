//go:build linux && cgo

package rdmacore

import (
	"testing"
	"time"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// PendingJoins reports how many of v's joins wait for their event: the
// entries pump would fill.
func PendingJoins(v verbs.ID) int {
	d := v.(*id)
	d.cmMu.Lock()
	defer d.cmMu.Unlock()
	return len(d.pending)
}

// FailJoinWaits makes every Join's wait for the event channel fail with
// err until t ends; a Join whose event is there at its first look waits
// for nothing and is not failed.
func FailJoinWaits(t testing.TB, err error) {
	old := newJoinWait
	newJoinWait = func(fd int) (joinWaiter, error) {
		w, e := old(fd)
		if e != nil {
			return nil, e
		}
		return failingWait{w, err}, nil
	}
	t.Cleanup(func() { newJoinWait = old })
}

type failingWait struct {
	joinWaiter
	err error
}

func (w failingWait) wait(time.Duration) error { return w.err }
