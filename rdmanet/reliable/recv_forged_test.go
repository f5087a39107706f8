package reliable

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A datagram that names this conn's own session and comes from its own
// address is its own (looped back, or forged) and is dropped, counted;
// the same session from another address is a sender like any other.
func TestOwnSessionFromOwnAddressDropped(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{})
	before := r.Stats()
	inject(r, dataDG(r.session, 0, 0, 0, 1, []byte("me")), r.local)
	require.Equal(t, 0, r.Stats().Senders, "a sender made of our own datagram")
	require.Equal(t, before.Own+1, r.Stats().Own)
}

// A heartbeat whose position is next itself but names a message the
// sender cannot have reached from there is implausible.
func TestHeartbeatAtNextImplausible(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{})
	from := r.local
	from.QPN ^= 0x1111
	inject(r, dataDG(92, 0, 0, 0, 1, []byte("m0")), from) // unread: next 0, message 0
	before := r.Stats().Implausible
	inject(r, heartbeatDG(92, 0, 3, 0, 0), from)
	require.Equal(t, before+1, r.Stats().Implausible, "position next in message 3; stats %+v", r.Stats())
}

// A NAK or a status report that names another session is not for this
// conn: dropped and counted as Foreign, answered with nothing and moving
// nothing; the same datagram naming this conn's session is taken.
func TestNAKAndStatusForAnotherSessionForeign(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{FlowControl: FlowMin})
	from := r.local
	from.QPN ^= 0x2222
	before := r.Stats()
	inject(r, nakDG(71, r.session+1, 0, 1), from)
	st := r.Stats()
	require.Equal(t, before.Foreign+1, st.Foreign, "a NAK for session %d; stats %+v", r.session+1, st)
	require.Equal(t, before.NAKsReceived, st.NAKsReceived)
	inject(r, statusDG(71, r.session+1, 0, 100), from)
	st2 := r.Stats()
	require.Equal(t, st.Foreign+1, st2.Foreign, "a status for session %d; stats %+v", r.session+1, st2)
	require.Equal(t, 0, r.Receivers(), "a receiver made of another session's status")

	inject(r, nakDG(71, r.session, 0, 1), from)
	require.Equal(t, st2.NAKsReceived+1, r.Stats().NAKsReceived, "a NAK for our own session")
	inject(r, statusDG(71, r.session, 0, 100), from)
	require.Equal(t, 1, r.Receivers(), "a status for our own session")
	require.Equal(t, st2.Foreign, r.Stats().Foreign)
}

// A loss report from a sender this receiver has NAKed, with a message
// number the sender cannot have reached from that position, is dropped
// and counted as Implausible: nothing is reported lost.
func TestImplausibleLossReportDropped(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{})
	from := r.local
	from.QPN ^= 0x3333
	inject(r, dataDG(94, 0, 0, 0, 1, []byte("m0")), from)
	inject(r, dataDG(94, 2, 2, 0, 1, []byte("m2")), from) // seq 1 missing
	deadline := time.Now().Add(10 * time.Second)
	for r.Stats().NAKsSent == 0 { // a lone receiver asks at once
		require.False(t, time.Now().After(deadline), "no NAK for the gap; stats %+v", r.Stats())
		time.Sleep(100 * time.Microsecond)
	}
	skipTo := func() uint64 { // where the sender's window is known to start
		r.rcv.mu.Lock()
		defer r.rcv.mu.Unlock()
		return r.rcv.peers[peerKey{addr: from, session: 94}].skipTo
	}
	before := r.Stats()
	inject(r, lostDG(94, 1, 1000), from) // message 1000 at seq 1: implausible
	st := r.Stats()
	require.Equal(t, before.Implausible+1, st.Implausible, "stats %+v", st)
	require.Equal(t, before.Unsolicited, st.Unsolicited)
	require.Zero(t, skipTo(), "the window moved on an implausible report")
	inject(r, lostDG(94, 2, 2), from) // plausible: the sender's window starts at 2
	require.Equal(t, st.Implausible, r.Stats().Implausible)
	require.Equal(t, uint64(2), skipTo(), "a plausible report of seq 1's loss")
	b, _, err := readMsg(t, r)
	require.NoError(t, err)
	require.Equal(t, "m0", string(b))
	_, _, err = readMsg(t, r)
	var le *LossError
	require.ErrorAs(t, err, &le)
	require.Equal(t, uint64(1), le.Messages, "%v", le)
	require.Equal(t, uint32(94), le.Session)
	require.Contains(t, le.Error(), "lost 1 messages")
	require.Contains(t, le.Error(), "session 0x0000005e")
}

// What was lost before the sender's window start is counted from the
// message number the window start gives, not from a datagram held at
// that seq that numbers its message lower (forged: the sender's window
// starts with message 9 at seq 10, where a forger's datagram says
// message 3): messages 1 to 8 are reported lost, not 1 and 2.
func TestLossCountedFromTheWindowStart(t *testing.T) {
	r := listenT(t, newGroup(), Config{SenderTimeout: time.Hour})
	from := r.local
	from.QPN ^= 0x4444
	const session = 95
	inject(r, dataDG(session, 0, 0, 0, 1, []byte("m0")), from)
	b, _, err := readMsg(t, r)
	require.NoError(t, err)
	require.Equal(t, "m0", string(b))
	inject(r, dataDG(session, 10, 3, 0, 1, []byte("x")), from) // seqs 1 to 9 missing
	inject(r, heartbeatDG(session, 11, 10, 10, 9), from)       // the window starts at seq 10, message 9
	requireLoss(t, r, &from, 8)
}

// A loss report condemns only what the receiver knows is missing: below
// high. The report comes by unicast and can overtake the group's
// datagrams still on their way, so a message whose first fragment is in
// and whose next ones were never seen missing is not given up. Here m2
// is two datagrams, seqs 2 and 3; seq 1 (m1) is NAKed and the sender
// answers that its window starts at seq 5 (m4) before seq 3 arrives:
// m1 is lost, m2 is read whole once seq 3 comes. Seed 114: settle's
// `p.contig < p.high` -> `<=` skipped m2 too (and m3), reported three
// messages lost and dropped seq 3 as old.
func TestLossReportSparesWhatIsNotKnownMissing(t *testing.T) {
	r := listenT(t, newGroup(), Config{SenderTimeout: time.Hour})
	from := r.local
	from.QPN ^= 0x5555
	const session = 96
	inject(r, dataDG(session, 0, 0, 0, 1, []byte("m0")), from)
	inject(r, dataDG(session, 2, 2, 0, 2, []byte("m2a")), from) // seq 1 missing
	waitCond(t, "a NAK for seq 1", func() bool { return r.Stats().NAKsSent != 0 })
	inject(r, lostDG(session, 5, 4), from)
	require.Zero(t, r.Stats().Implausible+r.Stats().Unsolicited, "the report taken")
	b, _, err := readMsg(t, r)
	require.NoError(t, err)
	require.Equal(t, "m0", string(b))
	_, _, err = readMsg(t, r)
	var le *LossError
	require.ErrorAs(t, err, &le)
	require.Equal(t, uint64(1), le.Messages, "m1 only: %v", le)

	inject(r, dataDG(session, 3, 2, 1, 2, []byte("m2b")), from)
	b, _, err = readMsg(t, r)
	require.NoError(t, err)
	require.Equal(t, "m2am2b", string(b))
	require.Zero(t, r.Stats().Duplicates, "seq 3 taken, not dropped as old")
}
