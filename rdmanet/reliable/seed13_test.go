//go:build linux

package reliable

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// The test gaps seed 13's sample found (docs/testing.md, Mutation
// testing, rdmanet/reliable).

// sealDG returns datagram b with a keyed trailer: transmit counter ctr,
// tagged under key as sent by QP qpn (what seal writes).
func sealDG(key, b []byte, ctr uint64, qpn uint32) []byte {
	var s sealer
	s.init(key)
	n := len(b)
	out := make([]byte, n+trailerLen)
	copy(out, b)
	setKeyed(out, true)
	binary.BigEndian.PutUint64(out[n:], ctr)
	copy(out[n+ctrLen:], s.tag(out[:n+ctrLen], qpn))
	return out
}

// A keyed conn keeps at most limit replay windows; a datagram from one
// source more, while every window was heard within expire, is dropped
// and counted as Foreign (and makes no window). The datagrams are
// authentic but malformed once opened (a fragment index past its
// count), so each one that passes the window is counted as Malformed
// and moves no other state.
func TestKeyedForeignWhenReplayWindowsFull(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{Key: testKey, MaxSenders: 1})
	limit := r.auth.limit
	require.Equal(t, 4*1+64, limit)
	bad := dataDG(93, 0, 0, 1, 1, nil) // frag 1 of 1: malformed
	from := func(i int) rdmanet.Addr { return rdmanet.Addr{QPN: 0x5000 + uint32(i)} }
	before := r.Stats()
	for i := range limit {
		inject(r, sealDG(testKey, bad, 1, from(i).QPN), from(i))
	}
	st := r.Stats()
	require.Equal(t, before.Malformed+uint64(limit), st.Malformed, "stats %+v", st)
	require.Equal(t, before.Foreign, st.Foreign, "a window for each of the first %d sources; stats %+v", limit, st)
	require.Len(t, r.auth.windows, limit)

	inject(r, sealDG(testKey, bad, 1, from(limit).QPN), from(limit))
	st2 := r.Stats()
	require.Equal(t, st.Foreign+1, st2.Foreign, "one source past the limit: Foreign; stats %+v", st2)
	require.Equal(t, st.Malformed, st2.Malformed, "not opened")
	require.Equal(t, st.Unauthenticated+st.Replayed, st2.Unauthenticated+st2.Replayed)
	require.Len(t, r.auth.windows, limit)
	// A known source still gets through.
	inject(r, sealDG(testKey, bad, 2, from(0).QPN), from(0))
	require.Equal(t, st2.Malformed+1, r.Stats().Malformed)
}

// The replay window spans 1984 counters below the highest accepted
// (31 words of 64: doc.go and auth.go promise far more reordering
// room than the paths make): exactly that far below is accepted, one
// more is refused, whatever the constant says.
func TestReplayWindowIs1984(t *testing.T) {
	const top, span = 5000, 1984
	var w replayWindow
	require.True(t, w.accept(top))
	require.True(t, w.accept(top-span), "a counter %d below the highest", span)
	require.False(t, w.accept(top-span), "again")
	require.False(t, w.accept(top-span-1), "a counter %d below the highest", span+1)
	// Every counter in between, in any order, once.
	for c := uint64(top - 1); c > top-span; c -= 7 {
		require.True(t, w.accept(c), "accept(%d)", c)
		require.False(t, w.accept(c), "accept(%d) again", c)
	}
	// The window moves with the highest: top+64 leaves top-span+63 too old.
	require.True(t, w.accept(top+64))
	require.False(t, w.accept(top+64-span-1))
	require.True(t, w.accept(top+64-span))
}

// nakPending says whether the timer loop sleeps on the fine timer: true
// while one sender's gap has a NAK timer running, false again once it
// is filled.
func TestNAKPendingForOneSender(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{})
	from := rdmanet.Addr{QPN: 0x4251}
	require.False(t, r.rcv.nakPending(), "no sender")
	inject(r, dataDG(81, 0, 0, 0, 1, []byte("m0")), from)
	require.False(t, r.rcv.nakPending(), "no gap")
	inject(r, dataDG(81, 2, 2, 0, 1, []byte("m2")), from) // seq 1 missing
	require.True(t, r.rcv.nakPending(), "one sender with a gap")
	inject(r, dataDG(81, 1, 1, 0, 1, []byte("m1")), from)
	for i, want := range []string{"m0", "m1", "m2"} {
		b, _, err := readMsg(t, r)
		require.NoError(t, err)
		require.Equal(t, want, string(b), "message %d", i)
	}
	require.False(t, r.rcv.nakPending(), "the gap filled")
}

// A NAK for what left the window is answered with one "lost" datagram,
// counted once.
func TestLostSentCountedOnce(t *testing.T) {
	group := newGroup()
	tx := listenT(t, group, Config{MaxMessage: 8 << 10, Window: 64})
	b := make([]byte, 10)
	for i := range 100 {
		_, err := tx.WriteTo(payload(b, uint64(i)), group)
		require.NoError(t, err)
	}
	tx.snd.mu.Lock()
	low, _ := tx.snd.low()
	tx.snd.mu.Unlock()
	require.Equal(t, uint64(100-64), low)
	from := rdmanet.Addr{QPN: 0x4252}
	before := tx.Stats()
	inject(tx, nakDG(82, tx.session, 0, 1), from)
	st := tx.Stats()
	require.Equal(t, before.LostSent+1, st.LostSent, "stats %+v", st)
	require.Equal(t, before.NAKsReceived+1, st.NAKsReceived)
	require.Equal(t, before.RepairsMulticast, st.RepairsMulticast, "nothing of seq 0 to repair")
}

// A window slot whose last send has not completed is waited for, and
// the wait counted (WindowWaits). The software backend completes each
// send as it is posted, so no write here ever waits; the test gives slot
// 0 the mark of a send not completed (past SendsPosted, so that
// WaitSends answers at once, with an error): reuse counts the wait and
// returns WaitSends' error rather than the slot.
func TestWindowWaitCounted(t *testing.T) {
	group := newGroup()
	tx := listenT(t, group, Config{MaxMessage: 8 << 10, Window: 64})
	_, err := tx.WriteTo([]byte("m0"), group)
	require.NoError(t, err)
	s := &tx.snd
	s.mu.Lock()
	defer s.mu.Unlock()
	before := tx.Stats().WindowWaits
	require.NoError(t, s.reuse(0), "a slot whose send completed")
	require.Equal(t, before, tx.Stats().WindowWaits, "no wait")
	s.posted[0] = tx.conn.SendsPosted() + 1
	require.Error(t, s.reuse(0), "a send not completed, and WaitSends failing")
	require.Equal(t, before+1, tx.Stats().WindowWaits)
}
