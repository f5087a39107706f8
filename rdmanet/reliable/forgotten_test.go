package reliable

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// More senders refused than the conn remembers: the memos of senders only
// ever refused are forgotten first, so a sender that was tracked (evicted
// while idle) keeps its place; every memo forgotten is counted
// (SendersForgotten), never a silent loss of place.
func TestSendersForgottenRefusedFirst(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{MaxSenders: 2, SenderTimeout: time.Hour})
	raw := rawConn(t, group)
	senders := func(s Stats) uint64 { return uint64(s.Senders) }
	evicted := func(s Stats) uint64 { return s.SendersEvicted }
	refused := func(s Stats) uint64 { return s.SendersRefused }

	// 1000 idle, 1001 with a gap (never idle): 1002 evicts 1000, 1003
	// (a gap) evicts 1002. Both evicted were tracked: resume memos.
	send(t, raw, group, r, senders, heartbeatDG(1000, 0, 0, 0, 0), dataDG(1001, 1, 0, 1, 2, []byte("gap")))
	send(t, raw, group, r, evicted, heartbeatDG(1002, 0, 0, 0, 0), dataDG(1003, 1, 0, 1, 2, []byte("gap")))
	require.Equal(t, 2, r.Stats().Senders)

	r.rcv.mu.Lock()
	memoMax := r.rcv.memoMax
	r.rcv.mu.Unlock()
	const extra = 8
	var hbs [][]byte
	for i := range memoMax + extra { // refused: nothing tracked is idle
		hbs = append(hbs, heartbeatDG(uint32(2000+i), 0, 0, 0, 0))
	}
	send(t, raw, group, r, refused, hbs...)

	st := r.Stats()
	// memoMax memos: the two resume memos and memoMax-2 refused ones;
	// the rest of the refused were forgotten, and counted.
	require.Equal(t, uint64(memoMax+extra-(memoMax-2)), st.SendersForgotten, "stats %+v", st)
	r.rcv.mu.Lock()
	defer r.rcv.mu.Unlock()
	require.Len(t, r.rcv.memos, memoMax)
	resume := map[uint32]bool{}
	for k, m := range r.rcv.memos {
		if m.resume {
			resume[k.session] = true
		}
	}
	require.Equal(t, map[uint32]bool{1000: true, 1002: true}, resume, "the tracked senders keep their place")
}

// forgetFirst: refused before once-tracked, then the least recently
// touched.
func TestForgetFirst(t *testing.T) {
	require.True(t, forgetFirst(memo{at: 9}, memo{at: 1, resume: true}))
	require.False(t, forgetFirst(memo{at: 1, resume: true}, memo{at: 9}))
	require.True(t, forgetFirst(memo{at: 1}, memo{at: 2}))
	require.False(t, forgetFirst(memo{at: 2, resume: true}, memo{at: 1, resume: true}))
}

// The memos are bounded at 4 MaxSenders, at least 64 (doc.go): with
// every tracked sender busy (a gap each), that many refused senders are
// remembered, none forgotten; one more forgets one. The rows put the
// bound on either side of the 64 floor.
func TestMemoBound(t *testing.T) {
	for _, tc := range []struct {
		maxSenders int
		want       int
	}{
		{1, 64},
		{16, 64},
		{17, 68},
		{0, 256}, // the default, 64 senders
	} {
		t.Run(fmt.Sprint(tc.maxSenders), func(t *testing.T) {
			r := listenT(t, newGroup(), Config{MaxSenders: tc.maxSenders, SenderTimeout: time.Hour})
			from := rdmanet.Addr{QPN: 0x4260}
			tracked := tc.maxSenders
			if tracked == 0 {
				tracked = r.cfg.MaxSenders
			}
			// Every tracked sender has a gap (seq 0 missing): none
			// may be evicted.
			for i := range tracked {
				inject(r, dataDG(uint32(3000+i), 1, 0, 1, 2, []byte("gap")), from)
			}
			require.Equal(t, tracked, r.Stats().Senders, "senders tracked")
			for i := range tc.want {
				inject(r, heartbeatDG(uint32(5000+i), 0, 0, 0, 0), from)
			}
			st := r.Stats()
			require.Equal(t, uint64(tc.want), st.SendersRefused, "got %d refused, want %d", st.SendersRefused, tc.want)
			require.Zero(t, st.SendersForgotten, "got %d forgotten with %d remembered, want 0", st.SendersForgotten, tc.want)
			inject(r, heartbeatDG(uint32(5000+tc.want), 0, 0, 0, 0), from)
			st = r.Stats()
			require.Equal(t, uint64(1), st.SendersForgotten, "got %d forgotten with %d+1 remembered, want 1", st.SendersForgotten, tc.want)
			r.rcv.mu.Lock()
			defer r.rcv.mu.Unlock()
			require.Len(t, r.rcv.memos, tc.want, "memos")
		})
	}
}
