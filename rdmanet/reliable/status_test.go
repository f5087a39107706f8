package reliable

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// A receiver reports to a FlowMin sender once its position, or its room
// (next + RecvWindow), moved on by exactly a quarter of RecvWindow since
// its last report, not one datagram later: the sender may be waiting for
// that room. The timer's reports are off here (StatusInterval an hour),
// so every status counted is statusDue's.
func TestStatusDueAtAQuarter(t *testing.T) {
	group := newGroup()
	const rw = 64
	// MaxMessage 8 KiB: RecvWindow's floor (two largest messages) stays
	// under rw at MTU 1024 too (rxe).
	c := listenT(t, group, Config{RecvWindow: rw, MaxMessage: 8 << 10, StatusInterval: time.Hour})
	raw := rawConn(t, group) // where the status goes
	r := &c.rcv
	r.mu.Lock()
	defer r.mu.Unlock()
	p := &peer{flowMin: true, key: peerKey{addr: *raw.LocalAddr().(*rdmanet.Addr), session: 9}}
	p.statusLim = p.next + rw
	sent := func() uint64 { return c.stats.statusSent.Load() }
	due := func(what string, want bool) {
		t.Helper()
		before := sent()
		r.statusDue(p, c.now())
		if want {
			require.Equal(t, before+1, sent(), "%s: a status sent", what)
		} else {
			require.Equal(t, before, sent(), "%s: no status", what)
		}
	}
	p.contig = rw/4 - 1
	due("position moved by a quarter less one", false)
	p.contig = rw / 4
	due("position moved by a quarter", true)
	require.Equal(t, uint64(rw/4), p.statusPos)
	require.Equal(t, uint64(rw), p.statusLim)

	p.next = rw/4 - 1
	due("room moved by a quarter less one", false)
	p.next = rw / 4
	due("room moved by a quarter", true)
	require.Equal(t, uint64(rw/4+rw), p.statusLim)

	p.flowMin = false
	p.contig, p.next = 10*rw, 10*rw
	due("a FlowMax sender", false)
}

// The timer loop's sweep reports to a sender once its last report is
// exactly statusEvery old, not a nanosecond later. The instants are ten
// minutes ahead of the conn's clock, so the timer loop's own sweeps,
// at the real time, leave the sender alone.
func TestStatusEveryAtItsDue(t *testing.T) {
	group := newGroup()
	c := listenT(t, group, Config{SenderTimeout: time.Hour})
	from := *rawConn(t, group).LocalAddr().(*rdmanet.Addr) // where the status goes
	inject(c, dataDG(87, 0, 0, 0, 1, []byte("m0")), from)
	r := &c.rcv
	due := c.now() + int64(10*time.Minute)
	r.mu.Lock()
	p := r.peers[peerKey{addr: from, session: 87}]
	require.NotNil(t, p)
	if p.statusOwed { // the first report, owed at once: taken as sent
		p.statusOwed = false
		r.owed--
	}
	every := r.statusEvery(p)
	p.statusAt = due - every
	r.mu.Unlock()

	sent := func() uint64 { return c.stats.statusSent.Load() }
	for _, at := range []struct {
		now  int64
		want uint64
	}{{due - 1, 0}, {due, 1}} {
		before := sent()
		r.mu.Lock()
		r.lastTick = at.now - r.sweepGap // a sweep at at.now
		r.mu.Unlock()
		r.tick(at.now)
		require.Equal(t, at.want, sent()-before, "statuses sent %d ns after the last report, got %d, want %d", at.now-(due-every), sent()-before, at.want)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	require.Equal(t, due, p.statusAt, "got the last report at %d, want %d", p.statusAt, due)
}

// owedSender makes a conn (StatusInterval and SenderTimeout an hour)
// owe a status report to a FlowMin sender of session, forged from a raw
// conn at from: its first datagram is reported at once (a new sender),
// read, and then its heartbeat asks for a report (flagWait) within the
// StatusInterval of that one.
func owedSender(t *testing.T, session uint32) (*Conn, rdmanet.Addr) {
	t.Helper()
	group := newGroup()
	r := listenT(t, group, Config{SenderTimeout: time.Hour, StatusInterval: time.Hour})
	from := *rawConn(t, group).LocalAddr().(*rdmanet.Addr) // where the status goes
	b := make([]byte, headerLen+2)
	putHeader(b, &header{kind: kindData, flags: flagFlowMin, session: session, seq: 0, msg: 0, nfrag: 1})
	inject(r, b, from) // reported at once: the sender is new
	require.Equal(t, uint64(1), r.Stats().StatusSent)
	_, _, err := readMsg(t, r) // the room moved: news for the sender
	require.NoError(t, err)
	hb := make([]byte, headerLen+hbPayload)
	putHeader(hb, &header{kind: kindHeartbeat, flags: flagFlowMin | flagWait, session: session, seq: 1, msg: 1})
	putHeartbeat(hb[headerLen:], 1, 1)
	inject(r, hb, from) // within a StatusInterval (an hour) of the report: owed
	return r, from
}

// A report owed (a FlowMin sender's heartbeat asked for one within
// StatusInterval of the last: r.owed) goes at its due, StatusInterval
// after the last, between sweeps too: tick looks at the senders while
// one is owed, and says when to look again for it. The last sweep is
// set two nanoseconds before the due, so neither tick below is one
// (sweeps come at least a StatusInterval, here an hour, apart), and the
// timer loop's own ticks, at the real time, an hour before, leave the
// report alone. Seed 123: tick's `r.owed == 0` -> `!=` returned before the
// senders whenever a report was owed, and it waited for the sweep.
func TestOwedStatusAtItsDueBetweenSweeps(t *testing.T) {
	r, from := owedSender(t, 82)

	rc := &r.rcv
	rc.mu.Lock()
	p := rc.peers[peerKey{addr: from, session: 82}]
	require.NotNil(t, p)
	require.True(t, p.statusOwed, "a report owed")
	require.Equal(t, 1, rc.owed, "senders owed a report")
	require.Zero(t, rc.pending, "senders with a NAK timer running")
	due := p.statusAt + int64(time.Hour)
	rc.lastTick = due - 2
	rc.mu.Unlock()

	require.Equal(t, due, rc.tick(due-1), "when the tick a nanosecond before the due looks again")
	require.Equal(t, uint64(1), r.Stats().StatusSent, "statuses sent a nanosecond before the due")
	rc.tick(due)
	require.Equal(t, uint64(2), r.Stats().StatusSent, "statuses sent at the due")
	rc.mu.Lock()
	defer rc.mu.Unlock()
	require.False(t, p.statusOwed, "a report owed after it was sent")
	require.Zero(t, rc.owed, "senders owed a report after it was sent")
	require.Equal(t, due-2, rc.lastTick, "neither tick was a sweep")
}

// How often a receiver reports to a sender unasked (statusEvery): to a
// FlowMin sender a quarter of ReceiverTimeout; to a FlowMax one a whole
// ReceiverTimeout while the conn's own heartbeats come at least twice
// in it (HeartbeatMax at most half of it), else a quarter; never more
// often than StatusInterval.
func TestStatusEvery(t *testing.T) {
	const ms = time.Millisecond
	for _, tc := range []struct {
		name    string
		cfg     Config
		flowMin bool
		want    time.Duration
	}{
		{"FlowMin", Config{ReceiverTimeout: 400 * ms, HeartbeatMax: 100 * ms}, true, 100 * ms},
		{"FlowMax, HeartbeatMax a quarter", Config{ReceiverTimeout: 400 * ms, HeartbeatMax: 100 * ms}, false, 400 * ms},
		{"FlowMax, HeartbeatMax exactly half", Config{ReceiverTimeout: 400 * ms, HeartbeatMax: 200 * ms}, false, 400 * ms},
		{"FlowMax, HeartbeatMax past half", Config{ReceiverTimeout: 400 * ms, HeartbeatMax: 200*ms + time.Microsecond}, false, 100 * ms},
		{"FlowMin, StatusInterval over a quarter", Config{ReceiverTimeout: 400 * ms, HeartbeatMax: 100 * ms, StatusInterval: 150 * ms}, true, 150 * ms},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := listenT(t, newGroup(), tc.cfg)
			got := time.Duration(c.rcv.statusEvery(&peer{flowMin: tc.flowMin}))
			require.Equal(t, tc.want, got, "got a report every %v, want %v", got, tc.want)
		})
	}
}

// The sweep looks at every peer an eighth of the shortest period due by
// the clock alone: a quarter of ReceiverTimeout (a report to stay known)
// or SenderTimeout (a sender forgotten); at least StatusInterval.
func TestSweepGap(t *testing.T) {
	const ms = time.Millisecond
	for _, tc := range []struct {
		name string
		cfg  Config
		want time.Duration
	}{
		{"a quarter of ReceiverTimeout", Config{StatusInterval: ms, ReceiverTimeout: 800 * ms, SenderTimeout: time.Hour}, 25 * ms},
		{"SenderTimeout", Config{StatusInterval: ms, ReceiverTimeout: 800 * ms, SenderTimeout: 100 * ms}, 12500 * time.Microsecond},
		{"both the same", Config{StatusInterval: ms, ReceiverTimeout: 800 * ms, SenderTimeout: 200 * ms}, 25 * ms},
		{"StatusInterval", Config{StatusInterval: 50 * ms, ReceiverTimeout: 800 * ms, SenderTimeout: time.Hour}, 50 * ms},
	} {
		got := time.Duration(sweepGap(&tc.cfg))
		require.Equal(t, tc.want, got, "%s: got a sweep every %v, want %v", tc.name, got, tc.want)
	}
}

// A receiver with no news for a FlowMin sender (its position and room
// as last reported) answers the sender's heartbeat sent while a write
// waits once its last report is exactly 4 StatusIntervals old (it may
// have been lost on the way), and not a nanosecond sooner. The peer is
// not among the conn's, so the timer loop leaves it alone.
func TestAnswerHeartbeatAtFourStatusIntervals(t *testing.T) {
	group := newGroup()
	const every = time.Second
	c := listenT(t, group, Config{StatusInterval: every})
	raw := rawConn(t, group) // where the status goes
	r := &c.rcv
	r.mu.Lock()
	defer r.mu.Unlock()
	p := &peer{flowMin: true, key: peerKey{addr: *raw.LocalAddr().(*rdmanet.Addr), session: 9}}
	r.sendStatus(p, 0) // its last report, at 0; nothing moves after it
	sent := c.stats.statusSent.Load()
	r.answerHeartbeat(p, int64(4*every)-1)
	require.Equal(t, sent, c.stats.statusSent.Load(), "an answer with no news a nanosecond before 4 StatusIntervals")
	require.False(t, p.statusOwed, "an answer owed with no news")
	r.answerHeartbeat(p, int64(4*every))
	require.Equal(t, sent+1, c.stats.statusSent.Load(), "the answer with no news at 4 StatusIntervals")
}

// A report that reading makes (statusDue: the room moved on by a
// quarter of RecvWindow) is stamped with the clock of the read that made
// it: a ReadFrom that read no datagram itself has no clock reading to
// pass, and the delivery reads one.
func TestStatusOnReadStampedWithItsTime(t *testing.T) {
	const rw = 16
	group := newGroup()
	r := listenT(t, group, Config{RecvWindow: rw, MaxMessage: 1024, StatusInterval: time.Hour})
	from := *rawConn(t, group).LocalAddr().(*rdmanet.Addr) // where the status goes
	const session = 98
	for i := range uint64(rw / 4) { // a FlowMin sender's quarter of the window
		b := dataDG(session, i, i, 0, 1, []byte("m"))
		b[1] |= flagFlowMin
		inject(r, b, from)
	}
	before := r.Stats().StatusSent
	start := r.now()
	for i := range rw / 4 {
		b, _, err := readMsg(t, r)
		require.NoError(t, err, "message %d", i)
		require.Equal(t, "m", string(b))
	}
	require.Equal(t, before+1, r.Stats().StatusSent, "the report of the room the reads made")
	r.rcv.mu.Lock()
	at := peerOf(t, r, session).statusAt
	r.rcv.mu.Unlock()
	require.GreaterOrEqual(t, at, start, "the report stamped %d, before the reads began at %d", at, start)
}
