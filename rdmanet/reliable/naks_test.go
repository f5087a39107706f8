package reliable

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// The receiver's NAK timers (naks.go).

// A NAK timer fires at its due time exactly, not only after it: the
// tick at due sends the NAK (one a tick later would wait for the next
// sweep, since due is no longer ahead to wake the loop for). The test
// moves due 10 minutes ahead, where the timer loop leaves it alone, and
// runs tick itself at due-1 and at due.
func TestNAKFiresAtDue(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{SenderTimeout: time.Hour})
	from := *rawConn(t, group).LocalAddr().(*rdmanet.Addr) // where the NAK goes
	inject(r, dataDG(83, 0, 0, 0, 1, []byte("m0")), from)
	inject(r, dataDG(83, 2, 2, 0, 1, []byte("m2")), from) // seq 1 missing
	rc := &r.rcv
	rc.mu.Lock()
	p := rc.peers[peerKey{addr: from, session: 83}]
	require.NotNil(t, p)
	require.NotEqual(t, nakIdle, p.nak.state, "a NAK timer for the gap")
	due := r.now() + int64(10*time.Minute)
	p.nak.due = due
	rc.mu.Unlock()

	before := r.Stats().NAKsSent
	rc.tick(due - 1)
	require.Equal(t, before, r.Stats().NAKsSent, "a nanosecond before due")
	rc.tick(due)
	require.Equal(t, before+1, r.Stats().NAKsSent, "at due; stats %+v", r.Stats())
	// The NAK sent, the round waits for the repair: its timer still runs
	// (seed 66: sendNAKs' `runs == 0` -> `!=` took it off pending).
	rc.mu.Lock()
	pending := rc.pending
	rc.mu.Unlock()
	require.Equal(t, 1, pending, "senders with a NAK timer running, after the NAK")
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

// A NAK timer that finds nothing missing inside the receive window stops:
// a gap past a full window (the reader is behind) is not asked for, and
// no retry is armed. Sixteen datagrams fill RecvWindow, the seventeenth
// is missing and the eighteenth an overrun; the round's NAK falls due
// with nothing to ask.
func TestNAKTimerStopsWithNothingInsideTheWindow(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{RecvWindow: 16, MaxMessage: 1024, SenderTimeout: time.Hour})
	from := *rawConn(t, group).LocalAddr().(*rdmanet.Addr)
	for i := range uint64(16) {
		inject(r, dataDG(86, i, i, 0, 1, []byte("m")), from)
	}
	before := r.Stats()
	inject(r, dataDG(86, 17, 17, 0, 1, []byte("m17")), from) // 16 missing, 17 past the window
	require.Equal(t, before.Overruns+1, r.Stats().Overruns)
	rc := &r.rcv
	rc.mu.Lock()
	p := rc.peers[peerKey{addr: from, session: 86}]
	require.NotNil(t, p)
	due := p.nak.due
	rc.mu.Unlock()
	rc.tick(max(due, r.now())) // the timer loop may have been first: then this finds it done
	rc.mu.Lock()
	state, pending := p.nak.state, rc.pending
	rc.mu.Unlock()
	require.Equal(t, nakIdle, state, "a timer left running with nothing to ask")
	require.Zero(t, pending)
	require.Equal(t, before.NAKsSent, r.Stats().NAKsSent, "a NAK for a gap past the window")
}

// A heartbeat whose window starts exactly at the receiver's gap says the
// sender still holds what is missing: nothing is given up, the gap keeps
// its NAK timer, and the repair fills it. (A skip at the window start
// equal to contig moves nothing, and settle must not take it.)
func TestWindowStartAtTheGapKeepsIt(t *testing.T) {
	r := listenT(t, newGroup(), Config{SenderTimeout: time.Hour})
	from := rdmanet.Addr{QPN: 0x4267}
	const session = 97
	inject(r, dataDG(session, 0, 0, 0, 1, []byte("m0")), from)
	inject(r, dataDG(session, 2, 2, 0, 1, []byte("m2")), from) // seq 1 missing
	b, _, err := readMsg(t, r)
	require.NoError(t, err)
	require.Equal(t, "m0", string(b), "message 0")
	// next is at the gap now: the head is incomplete.
	done := make(chan struct{})
	go func() {
		inject(r, heartbeatDG(session, 3, 3, 1, 1), from) // the window starts at seq 1
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the heartbeat was not handled in 10 s, want at once")
	}
	r.rcv.mu.Lock()
	p := peerOf(t, r, session)
	contig, lost, state := p.contig, p.lost, p.nak.state
	r.rcv.mu.Unlock()
	require.Equal(t, uint64(1), contig, "got contig %d, want the gap at 1", contig)
	require.Zero(t, lost, "got %d messages given up, want none", lost)
	require.NotEqual(t, nakIdle, state, "the gap's NAK timer stopped")
	inject(r, dataDG(session, 1, 1, 0, 1, []byte("m1")), from)
	for i, want := range []string{"m1", "m2"} {
		b, _, err := readMsg(t, r)
		require.NoError(t, err, "message %d", i+1)
		require.Equal(t, want, string(b), "message %d", i+1)
	}
	require.Zero(t, r.Stats().LossesReported, "stats %+v", r.Stats())
}

// A NAK round asks for at most 8 missing runs: with ten single gaps
// (seqs 1, 3, ..., 19) in one round, the round's NAKs at its due are 8.
// Seq 20 comes second so that the round, started at the first gap, spans
// all ten.
func TestNAKsAtMostEightARound(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{SenderTimeout: time.Hour})
	from := *rawConn(t, group).LocalAddr().(*rdmanet.Addr) // where the NAKs go
	const session = 90
	inject(r, dataDG(session, 0, 0, 0, 1, []byte("m")), from)
	inject(r, dataDG(session, 20, 20, 0, 1, []byte("m")), from)
	for seq := uint64(2); seq < 20; seq += 2 {
		inject(r, dataDG(session, seq, seq, 0, 1, []byte("m")), from)
	}
	end, naks := nakRoundAtDue(t, r, from, session)
	require.Equal(t, uint64(21), end, "the round spans every gap")
	require.Equal(t, uint64(8), naks, "NAKs of a round with ten gaps; stats %+v", r.Stats())
}

// A NAK asks for nothing past the receive window, which could not keep
// its repair: with RecvWindow 16 and message 0 unread, a gap from seq 1
// to 16 (seq 17 an overrun) is asked as seqs 1 to 8 and 9 to 15, the
// last run cut at the window's end, not carried one past it. (Seed 138:
// sendNAKs' run `seq < end` -> `<=` asked 9 to 16.)
func TestNAKsStopAtTheWindowEnd(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{RecvWindow: 16, MaxMessage: 1024, SenderTimeout: time.Hour})
	raw := rawConn(t, group)
	from := *raw.LocalAddr().(*rdmanet.Addr) // where the NAKs go
	const session = 91
	inject(r, dataDG(session, 0, 0, 0, 1, []byte("m0")), from)
	inject(r, dataDG(session, 17, 17, 0, 1, []byte("m17")), from) // past the window: 1 to 16 missing
	_, naks := nakRoundAtDue(t, r, from, session)
	require.Equal(t, uint64(2), naks, "NAKs for seqs 1 to 15 (8 and 7); stats %+v", r.Stats())

	// The round's NAKs (and any the timer loop sent before it: a round
	// asks the same way), read until the one from seq 9.
	buf := make([]byte, 1<<16)
	for {
		seq, target, count := readNAK(t, raw, buf, "waiting for the NAK from seq 9")
		require.Equal(t, uint32(session), target, "the NAK's sender")
		require.Contains(t, []uint64{1, 9}, seq, "got a NAK from seq %d", seq)
		if seq == 1 {
			require.Equal(t, uint32(8), count, "the NAK from seq 1")
			continue
		}
		require.Equal(t, uint32(7), count, "the NAK from seq 9: seqs 9 to 15, the window ending at 16")
		return
	}
}

// nakRoundAtDue moves the due of the NAK round r runs for sender
// (from, session) 10 minutes ahead, where the timer loop leaves it alone
// (it may have sent a first NAK already: the round is then a retry,
// which asks the same way), ticks at that due and returns the round's
// end and the NAKs the tick sent.
func nakRoundAtDue(t *testing.T, r *Conn, from rdmanet.Addr, session uint32) (end, naks uint64) {
	t.Helper()
	rc := &r.rcv
	rc.mu.Lock()
	p := rc.peers[peerKey{addr: from, session: session}]
	if p == nil || p.nak.state == nakIdle {
		rc.mu.Unlock()
		t.Fatalf("no NAK round for session %d", session)
	}
	end = p.nak.end
	due := r.now() + int64(10*time.Minute)
	p.nak.due = due
	rc.mu.Unlock()

	before := r.Stats().NAKsSent
	rc.tick(due)
	return end, r.Stats().NAKsSent - before
}

// A NAK asks for at most nakPays (8) datagrams, what its padding to an
// MTU pays for: a run of 8 missing is one NAK, a run of 9 two.
func TestNAKAsksForAtMostEight(t *testing.T) {
	group := newGroup()
	from := *rawConn(t, group).LocalAddr().(*rdmanet.Addr) // where the NAKs go
	for _, tc := range []struct{ run, naks uint64 }{{8, 1}, {9, 2}} {
		r := listenT(t, group, Config{SenderTimeout: time.Hour})
		session := uint32(100 + tc.run)
		inject(r, dataDG(session, 0, 0, 0, 1, []byte("m")), from)
		inject(r, dataDG(session, tc.run+1, tc.run+1, 0, 1, []byte("m")), from) // seqs 1 to run missing
		_, naks := nakRoundAtDue(t, r, from, session)
		require.Equal(t, tc.naks, naks, "NAKs for a run of %d missing; stats %+v", tc.run, r.Stats())
	}
}

// A gap that fills before this receiver asked for it (another
// receiver's NAK brought the repair) teaches it a round trip: the time
// the gap took, while it has measured none (feedback.go: rttUnasked).
// Seed 111: nakUpdate's `asked := p.nak.tries > 0` -> `>= 0` took every
// round for one this receiver asked in, and the round trip stayed at
// InitialRTT.
func TestUnaskedFillTeachesRoundTrip(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{SenderTimeout: time.Hour})
	from := *rawConn(t, group).LocalAddr().(*rdmanet.Addr)
	var h header
	now := r.now()
	r.handle(dataDG(88, 0, 0, 0, 1, []byte("m0")), from, &h, now)
	r.handle(dataDG(88, 2, 2, 0, 1, []byte("m2")), from, &h, now) // seq 1 missing
	rc := &r.rcv
	rc.mu.Lock()
	p := rc.peers[peerKey{addr: from, session: 88}]
	require.NotNil(t, p)
	require.Equal(t, nakBackoff, p.nak.state, "a NAK timer for the gap")
	p.nak.due = now + int64(10*time.Minute) // no NAK of this receiver's
	require.Equal(t, int64(200*time.Microsecond), p.srtt, "InitialRTT, before")
	rc.mu.Unlock()

	took := 3 * time.Millisecond
	r.handle(dataDG(88, 1, 1, 0, 1, []byte("m1")), from, &h, now+int64(took))
	rc.mu.Lock()
	defer rc.mu.Unlock()
	require.Equal(t, nakIdle, p.nak.state, "the gap filled")
	require.Zero(t, p.nak.tries)
	require.Equal(t, int64(took), p.srtt, "the round trip: the time the gap took")
	require.Zero(t, p.rttvar, "still no sample of its own")
}

// A receiver's own NAK, answered, teaches it a round trip: the time from
// the round's first NAK to the repair of the first datagram that NAK
// asked for (feedback.go: repaired). With two missing runs in one round
// (seqs 1 and 3; seq 4 comes second, so that the round spans both) the
// round's first NAK is the one for seq 1, and its repair is the sample. Seed 126: sendNAKs' `if runs == 0 { first = start }` -> `!=`
// kept the start of the last run (or 0 with one run), so the repair of
// seq 1 answered no NAK of the round's, and the round trip stayed at
// InitialRTT.
func TestAskedRepairTeachesRoundTrip(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{SenderTimeout: time.Hour})
	from := *rawConn(t, group).LocalAddr().(*rdmanet.Addr) // where the NAKs go
	const session = 89
	var h header
	// 10 minutes ahead on the conn's clock: the round's due is past the
	// timer loop's ticks, which would send the NAK first (then twice: no
	// sample, Karn's rule).
	now := r.now() + int64(10*time.Minute)
	r.handle(dataDG(session, 0, 0, 0, 1, []byte("m0")), from, &h, now)
	r.handle(dataDG(session, 4, 4, 0, 1, []byte("m4")), from, &h, now)
	r.handle(dataDG(session, 2, 2, 0, 1, []byte("m2")), from, &h, now) // seqs 1 and 3 missing
	rc := &r.rcv
	rc.mu.Lock()
	p := rc.peers[peerKey{addr: from, session: session}]
	require.NotNil(t, p)
	require.Equal(t, nakBackoff, p.nak.state, "a NAK round for the gaps")
	require.Equal(t, uint64(5), p.nak.end, "the round spans both gaps")
	due := p.nak.due
	require.Equal(t, int64(200*time.Microsecond), p.srtt, "InitialRTT, before")
	require.Zero(t, p.rttvar, "no sample, before")
	rc.mu.Unlock()

	before := r.Stats().NAKsSent
	rc.tick(due)
	require.Equal(t, before+2, r.Stats().NAKsSent, "a NAK for each missing run; stats %+v", r.Stats())
	rc.mu.Lock()
	sentAt, tries := p.nak.sentAt, p.nak.tries
	rc.mu.Unlock()
	require.Equal(t, due, sentAt, "the round's first NAK noted")
	require.Equal(t, 1, tries, "NAKs sent once")

	took := 3 * time.Millisecond
	b := dataDG(session, 1, 1, 0, 1, []byte("m1"))
	markRepair(b)
	r.handle(b, from, &h, due+int64(took))
	rc.mu.Lock()
	defer rc.mu.Unlock()
	wantSRTT, wantVar := rttSample(int64(200*time.Microsecond), 0, int64(took))
	require.Equal(t, wantSRTT, p.srtt, "the round trip: the first NAK to its first datagram's repair")
	require.Equal(t, wantVar, p.rttvar)
}

// nakUpdate does nothing where nothing is missing and no round runs: a
// sender heard at seqs 0 and 1, nothing missing, and nakUpdate run
// again leaves its NAK timer idle and no timer pending (settle runs it
// after every datagram so, with no guard of its own).
func TestNAKUpdateIdleWhenNothingMissing(t *testing.T) {
	r := listenT(t, newGroup(), Config{})
	from := rdmanet.Addr{QPN: 0x4245}
	inject(r, dataDG(83, 0, 0, 0, 1, []byte("m0")), from)
	inject(r, dataDG(83, 1, 1, 0, 1, []byte("m1")), from)
	r.rcv.mu.Lock()
	defer r.rcv.mu.Unlock()
	p := r.rcv.peers[peerKey{addr: from, session: 83}]
	require.NotNil(t, p, "the sender tracked")
	require.Equal(t, uint64(2), p.contig, "contig")
	require.Equal(t, uint64(2), p.high, "high")
	require.Equal(t, nakTimer{}, p.nak, "the NAK timer after the datagrams")
	r.rcv.nakUpdate(p, r.now())
	require.Equal(t, nakTimer{}, p.nak, "the NAK timer after nakUpdate with nothing missing")
	require.Zero(t, r.rcv.pending, "senders with a NAK timer running")
}
