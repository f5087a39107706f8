package reliable

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// The survivors of seed 61's sample (docs/testing.md, Mutation testing,
// rdmanet/reliable).

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

// A read that leaves without reading the underlying conn inline (the
// message was ready) marks the reader as just left, at the conn's
// clock: the receive loop takes the conn back only after rxAway.
func TestReadLeavesAtNow(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{})
	from := rdmanet.Addr{QPN: 0x4262}
	away := func() int64 {
		r.rx.mu.Lock()
		defer r.rx.mu.Unlock()
		return r.rx.away
	}

	inject(r, dataDG(84, 0, 0, 0, 1, []byte("m0")), from)
	t0 := r.now()
	b, _, err := readMsg(t, r)
	require.NoError(t, err)
	require.Equal(t, "m0", string(b))
	require.GreaterOrEqual(t, away(), t0, "ReadFrom")
	require.LessOrEqual(t, away(), r.now())

	inject(r, dataDG(84, 1, 1, 0, 1, []byte("m1")), from)
	ms := []rdmanet.Message{{Buffer: make([]byte, 64)}}
	t0 = r.now()
	r.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := r.ReadBatch(ms)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, "m1", string(ms[0].Buffer[:ms[0].N]))
	require.GreaterOrEqual(t, away(), t0, "ReadBatch")
	require.LessOrEqual(t, away(), r.now())
}
