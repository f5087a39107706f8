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

// Leaving a group takes it, and only it, out of the self filter's set of
// groups: the send path counts a datagram to a group in the set as
// looped back and dropped by the filter (selfLooped).
func TestLeaveUpdatesSelfGroups(t *testing.T) {
	q := internalQP(t, verbs.QPConfig{BlockSelfMulticastLoopback: true})
	if !q.selfFilter {
		t.Skip("the kernel refused the self filter")
	}
	grps := [][4]byte{{239, 201, 9, 11}, {239, 201, 9, 12}, {239, 201, 9, 13}}
	for _, g := range grps {
		if _, err := q.join(g, false); err != nil {
			t.Fatalf("join %v: %v", g, err)
		}
	}
	for _, leave := range []int{1, 2} { // the middle one, then the last
		if err := q.leave(grps[leave]); err != nil {
			t.Fatalf("leave %v: %v", grps[leave], err)
		}
		for i, g := range grps {
			want := i == 0 || (i == 2 && leave == 1)
			if got := q.selfGroups.has(g); got != want {
				t.Errorf("after leaving %v: got has(%v) %v, want %v", grps[leave], g, got, want)
			}
		}
	}
}
