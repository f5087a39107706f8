//go:build linux

package soft

import (
	"testing"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// A full join of a group the QP holds send-only, the first it holds,
// makes that entry a full member's: one entry, one full membership, and
// a second full join is a no-op (no IP_ADD_MEMBERSHIP twice).
func TestFullJoinOfFirstSendOnlyGroup(t *testing.T) {
	q := internalQP(t, verbs.QPConfig{})
	grp := [4]byte{239, 201, 9, 1}
	for i, sendOnly := range []bool{true, false, false} {
		if _, err := q.join(grp, sendOnly); err != nil {
			t.Fatalf("join %d (send-only %v): %v", i, sendOnly, err)
		}
	}
	q.rcq.mu.Lock()
	n, full := len(q.rcq.groups), q.rcq.fullMembers()
	q.rcq.mu.Unlock()
	if n != 1 || full != 1 {
		t.Errorf("got %d groups, %d full, want 1 and 1", n, full)
	}
}
