package reliable

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// The receive path's counted drops, exact: each datagram of a message
// too long, or in its place (from its first seq to its last), is counted once, and a heartbeat whose window start is at
// next but names a message the sender cannot have reached is dropped as
// implausible. Datagrams are handed to the conn directly (inject), in
// order, so every count is exact.

func TestTooLongCountsEachDatagram(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{RecvWindow: 4096})
	from := rdmanet.Addr{QPN: 0x4242}
	const nfrag, sent = 1000, 10
	// Message 0 (unread: next stays 0), then message 1, too long, from
	// seq 10 (a gap before it: it is not reported yet).
	inject(r, dataDG(77, 0, 0, 0, 1, []byte("m0")), from)
	for i := range sent {
		inject(r, dataDG(77, uint64(10+i), 1, uint16(i), nfrag, make([]byte, 100)), from)
	}
	require.Equal(t, uint64(sent), r.Stats().TooLong, "datagrams of a %d-fragment message; stats %+v", nfrag, r.Stats())
	// A datagram of a message that fits, at a seq the long message
	// takes: dropped, counted once.
	inject(r, dataDG(77, 500, 1, 0, 1, []byte("in its place")), from)
	require.Equal(t, uint64(sent+1), r.Stats().TooLong, "a datagram in the long message's place; stats %+v", r.Stats())
	// So at its first seq and its last (its place is [10, 1010)); the
	// next message, at 1010, is kept.
	inject(r, dataDG(77, 10, 1, 0, 1, []byte("at its first seq")), from)
	require.Equal(t, uint64(sent+2), r.Stats().TooLong, "a datagram at the long message's first seq; stats %+v", r.Stats())
	inject(r, dataDG(77, 10+nfrag-1, 1, 0, 1, []byte("at its last seq")), from)
	require.Equal(t, uint64(sent+3), r.Stats().TooLong, "a datagram at the long message's last seq; stats %+v", r.Stats())
	inject(r, dataDG(77, 10+nfrag, 2, 0, 1, []byte("m2")), from)
	require.Equal(t, uint64(sent+3), r.Stats().TooLong, "the message after the long one; stats %+v", r.Stats())
	r.rcv.mu.Lock()
	p := peerOf(t, r, 77)
	kept := p.valid(10 + nfrag)
	r.rcv.mu.Unlock()
	require.True(t, kept, "the message after the long one kept")
}

// A message of MaxMessage bytes takes ceil(MaxMessage / frag) datagrams
// (one at least): a datagram of a message of that many is kept, one of
// a message of one more is too long. The rows put MaxMessage on either
// side of a whole number of datagrams.
func TestTooLongAtMaxMessage(t *testing.T) {
	frag := listenT(t, newGroup(), Config{}).frag // payload bytes per datagram
	for _, tc := range []struct {
		maxMessage int
		nfrag      uint16 // the most a message may take
	}{
		{1, 1},
		{frag - 1, 1},
		{frag, 1},
		{frag + 1, 2},
		{2 * frag, 2},
		{2*frag + 1, 3},
	} {
		r := listenT(t, newGroup(), Config{MaxMessage: tc.maxMessage})
		from := rdmanet.Addr{QPN: 0x4244}
		inject(r, dataDG(79, 0, 0, 0, tc.nfrag, []byte("fits")), from)
		require.Zero(t, r.Stats().TooLong, "MaxMessage %d: a datagram of a %d-datagram message counted too long", tc.maxMessage, tc.nfrag)
		inject(r, dataDG(80, 0, 0, 0, tc.nfrag+1, []byte("long")), from)
		require.Equal(t, uint64(1), r.Stats().TooLong, "MaxMessage %d: got %d too long for a %d-datagram message, want 1",
			tc.maxMessage, r.Stats().TooLong, tc.nfrag+1)
	}
}

// Past a message too long to keep, the message number may have moved
// one less than the datagrams the long message took further than the
// seq (slack): a forged long message may have covered as many of the
// sender's one-datagram messages, and the sender's next is numbered at
// most that far on; one further is implausible. Message 1, too long,
// takes seqs 1 to 1000 (its first datagram only heard); at seq 1001
// message 1001 is plausible (999 messages displaced, 1000 lost with the
// long one), message 1002 is not.
func TestTooLongSlackIsItsDatagrams(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{RecvWindow: 4096})
	from := rdmanet.Addr{QPN: 0x4245}
	const session, nfrag = 81, 1000 // more than MaxMessage (64 KiB) takes at any MTU
	inject(r, dataDG(session, 0, 0, 0, 1, []byte("m0")), from)
	b, _, err := readMsg(t, r)
	require.NoError(t, err)
	require.Equal(t, "m0", string(b))
	inject(r, dataDG(session, 1, 1, 0, nfrag, make([]byte, 100)), from)
	require.Equal(t, uint64(1), r.Stats().TooLong, "the long message's first datagram; stats %+v", r.Stats())
	inject(r, dataDG(session, 1+nfrag, 2+nfrag, 0, 1, []byte("too far")), from)
	require.Equal(t, uint64(1), r.Stats().Implausible, "message %d at seq %d, past a %d-datagram message %d; stats %+v",
		2+nfrag, 1+nfrag, nfrag, 1, r.Stats())
	inject(r, dataDG(session, 1+nfrag, 1+nfrag, 0, 1, []byte("m1001")), from)
	require.Equal(t, uint64(1), r.Stats().Implausible, "message %d at seq %d; stats %+v", 1+nfrag, 1+nfrag, r.Stats())
	requireLoss(t, r, &from, nfrag)
	b, _, err = readMsg(t, r)
	require.NoError(t, err)
	require.Equal(t, "m1001", string(b))
}

func TestHeartbeatWindowStartAtNextImplausible(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{})
	from := rdmanet.Addr{QPN: 0x4243}
	// The sender is placed at seq 0, message 0 (nothing read: next 0).
	inject(r, dataDG(78, 0, 0, 0, 1, []byte("m0")), from)
	require.Equal(t, 1, r.Stats().Senders)
	before := r.Stats().Implausible
	// Position seq 5, message 5: plausible. Window start seq 0 (next)
	// in message 3: three messages in no datagram.
	inject(r, heartbeatDG(78, 5, 5, 0, 3), from)
	require.Equal(t, before+1, r.Stats().Implausible, "a window start at next, three messages ahead of it; stats %+v", r.Stats())
	// The same window start in message 0 is plausible.
	inject(r, heartbeatDG(78, 5, 5, 0, 0), from)
	require.Equal(t, before+1, r.Stats().Implausible, "a window start at next, in its message; stats %+v", r.Stats())
}

// fragments is ceil(n / (mtu - headerLen)): a byte past a whole number
// of datagrams takes one more.
func TestFragments(t *testing.T) {
	const mtu = 1024
	f := mtu - headerLen
	for _, c := range []struct {
		n    int
		want int64
	}{{0, 0}, {1, 1}, {f - 1, 1}, {f, 1}, {f + 1, 2}, {2 * f, 2}, {2*f + 1, 3}, {2*f + 2, 3}} {
		require.Equal(t, c.want, fragments(c.n, mtu), "fragments(%d, %d)", c.n, mtu)
	}
}

// pending counts the senders whose NAK timer runs: a sender forgotten
// (SenderTimeout) with none running leaves it at 0, not below (it picks
// the timer loop's fine timer while a NAK is due).
func TestPendingAfterSenderForgotten(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{SenderTimeout: 20 * time.Millisecond})
	from := rdmanet.Addr{QPN: 0x4244}
	inject(r, dataDG(79, 0, 0, 0, 1, []byte("m0")), from)
	b, _, err := readMsg(t, r) // nothing queued: the sender may be forgotten
	require.NoError(t, err)
	require.Equal(t, "m0", string(b))
	waitStat(t, r, "senders timed out", func(s Stats) uint64 { return s.SendersTimedOut }, 1)
	r.rcv.mu.Lock()
	pending := r.rcv.pending
	r.rcv.mu.Unlock()
	require.Zero(t, pending, "senders with a NAK timer running")
}

// owed counts the senders owed a status report: a FlowMin sender whose
// heartbeat asked for one (flagWait) too soon after the last is owed
// one, and forgetting it (forget: SenderTimeout, a fin, an eviction)
// takes it off the count (which
// keeps the timer loop's tick from looking at every sender while it is
// not 0). Seed 202: forget's `r.owed--` -> `r.owed++`, on no test's line.
func TestOwedAfterSenderForgotten(t *testing.T) {
	r, from := owedSender(t, 81)
	owed := func() int {
		r.rcv.mu.Lock()
		defer r.rcv.mu.Unlock()
		return r.rcv.owed
	}
	require.Equal(t, 1, owed(), "senders owed a report")
	require.Equal(t, uint64(1), r.Stats().StatusSent)
	// Forgotten as the tick's sweep forgets a sender gone quiet (its
	// sweeps come a StatusInterval apart, here an hour).
	r.rcv.mu.Lock()
	r.rcv.forget(r.rcv.peers[peerKey{addr: from, session: 81}])
	r.rcv.mu.Unlock()
	require.Zero(t, owed(), "senders owed a report, after the one owed was forgotten")
}

// A data datagram says whether its sender runs FlowMin (flagFlowMin):
// the receiver's statuses follow it, both ways.
func TestDataFlowMinFlag(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{})
	from := rdmanet.Addr{QPN: 0x4245}
	flowMin := func() bool {
		r.rcv.mu.Lock()
		defer r.rcv.mu.Unlock()
		for k, p := range r.rcv.peers {
			if k.session == 80 {
				return p.flowMin
			}
		}
		t.Fatal("the sender is not tracked")
		return false
	}
	for i, flags := range []uint8{flagFlowMin, 0, flagFlowMin} {
		b := make([]byte, headerLen+2)
		putHeader(b, &header{kind: kindData, flags: flags, session: 80, seq: uint64(i), msg: uint64(i), nfrag: 1})
		inject(r, b, from)
		require.Equal(t, flags != 0, flowMin(), "datagram %d, flags %#x", i, flags)
	}
}

// satAdd adds, or stays at the largest uint64 where the sum wraps;
// adding 0 changes nothing.
func TestSatAdd(t *testing.T) {
	const top = ^uint64(0)
	for _, c := range [][3]uint64{
		{3, 4, 7}, {5, 0, 5}, {0, 0, 0}, {top, 0, top}, {top - 1, 1, top},
		{top, 1, top}, {top - 5, 10, top}, {1 << 63, 1 << 63, top},
	} {
		require.Equal(t, c[2], satAdd(c[0], c[1]), "satAdd(%d, %d)", c[0], c[1])
	}
}

// Only a heartbeat with the fin flag marks its sender as closing (it is
// forgotten once everything it sent is read) and is answered with a
// status at once; a plain heartbeat does neither.
func TestHeartbeatFinFlag(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{StatusInterval: time.Hour, SenderTimeout: time.Hour})
	from := *rawConn(t, group).LocalAddr().(*rdmanet.Addr) // where the status goes
	const session = 96
	fin := func() bool {
		r.rcv.mu.Lock()
		defer r.rcv.mu.Unlock()
		return peerOf(t, r, session).fin
	}
	inject(r, heartbeatDG(session, 0, 0, 0, 0), from) // placed: its first status
	before := r.Stats().StatusSent
	inject(r, heartbeatDG(session, 0, 0, 0, 0), from)
	require.False(t, fin(), "a plain heartbeat marked its sender closing")
	require.Equal(t, before, r.Stats().StatusSent, "a status for a plain heartbeat")
	b := heartbeatDG(session, 0, 0, 0, 0)
	b[1] |= flagFin
	inject(r, b, from)
	require.True(t, fin(), "a fin heartbeat did not mark its sender closing")
	require.Equal(t, before+1, r.Stats().StatusSent, "the status for a fin heartbeat")
}

// A sender forgotten at its fin (everything it sent read) is remembered
// where it ended: a fin heartbeat of its linger heard after the sweep
// forgot it places it there again, not at seq 0, where a heartbeat sent
// in its start (hbStart: its first second, its first window) places a
// sender the receiver does not know. Placed at 0, the receiver NAKed all
// the sender still held and took its messages again, to be read a second
// time: TestRepairOncePerLoss counted 64 repairs more than its 10 about
// once in 25 runs, the sender's fin heartbeats crossing a receiver's sweep.
func TestFinishedSenderHeardAgainResumesAtItsEnd(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{StatusInterval: time.Hour, SenderTimeout: time.Hour})
	from := *rawConn(t, group).LocalAddr().(*rdmanet.Addr) // where the statuses go
	const session = 97
	for i := range uint64(2) {
		inject(r, dataDG(session, i, i, 0, 1, []byte{'a' + byte(i)}), from)
		b, _, err := readMsg(t, r)
		require.NoError(t, err)
		require.Equal(t, []byte{'a' + byte(i)}, b)
	}
	fin := make([]byte, headerLen+hbPayload)
	putHeader(fin, &header{kind: kindHeartbeat, flags: flagFin, frag: hbStart, session: session, seq: 2, msg: 2})
	putHeartbeat(fin[headerLen:], 0, 0) // it still holds all it sent
	inject(r, fin, from)
	rc := &r.rcv
	now := r.now()
	rc.mu.Lock()
	rc.lastTick = now - rc.sweepGap // the next tick sweeps
	rc.mu.Unlock()
	rc.tick(now)
	require.Zero(t, r.Stats().Senders, "the sender, finished and read, forgotten at the sweep")

	inject(r, fin, from) // its linger's next round
	rc.mu.Lock()
	p := peerOf(t, r, session)
	next, nextMsg, nak, ready := p.next, p.nextMsg, p.nak.state, rc.rLen
	rc.mu.Unlock()
	require.Equal(t, uint64(2), next, "the seq the sender is placed at, heard again")
	require.Equal(t, uint64(2), nextMsg, "the message it is placed at, heard again")
	require.Equal(t, nakIdle, nak, "a NAK pending for what was read")
	require.Zero(t, ready, "senders with something to read")
}

// A message read straight into the reader's buffer (deliverDirect) sets
// slack to 0, as a read from the window does: the sender's next message
// number may then be no further ahead than its seq, and a datagram one
// further is implausible. Messages are sent one at a time to a waiting
// reader until one goes direct; then seq next with message nextMsg+1
// is refused. (Seed 138: deliverDirect's `p.slack = 0` -> `1` took it.)
func TestDirectReadLeavesNoSlack(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{SenderTimeout: time.Hour})
	raw := rawConn(t, group)
	from := *raw.LocalAddr().(*rdmanet.Addr)
	const session = 93
	buf := make([]byte, 1024)
	deadline := time.Now().Add(20 * time.Second)
	var seq uint64
	for ; ; seq++ {
		require.False(t, time.Now().After(deadline), "no message read direct in 20 s (%d sent); stats %+v", seq, r.Stats())
		done := make(chan error, 1)
		go func() {
			r.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, _, err := r.ReadFrom(buf)
			done <- err
		}()
		waitReaderAsks(t, r)
		before := r.stats.direct.Load()
		_, err := raw.WriteTo(dataDG(session, seq, seq, 0, 1, []byte("m")), group)
		require.NoError(t, err)
		require.NoError(t, <-done, "reading message %d", seq)
		if r.stats.direct.Load() > before {
			break // message seq went direct
		}
	}
	before := r.Stats().Implausible
	inject(r, dataDG(session, seq+1, seq+2, 0, 1, []byte("too far")), from)
	require.Equal(t, before+1, r.Stats().Implausible, "message %d at seq %d, after message %d read direct; stats %+v",
		seq+2, seq+1, seq, r.Stats())
}
