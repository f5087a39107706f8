package reliable

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// waitStat waits, bounded, until get(c.Stats()) reaches want: a counter
// moves after what it counts (a repair is sent, then counted).
func waitStat(t testing.TB, c *Conn, what string, get func(Stats) uint64, want uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for get(c.Stats()) < want {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d after 10 s, want %d; stats %+v", what, get(c.Stats()), want, c.Stats())
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// One data datagram lost by one of two receivers: the counters that
// loss makes exact. The receiver that lost it recovers it in one NAK
// round (GapsFilled 1, with its delay) and sees no copy twice; the other
// gets each multicast repair as a second copy (a duplicate).
func TestOneLossCounts(t *testing.T) {
	group := newGroup()
	const count, lose = 100, 50
	var dropped atomic.Uint64
	lossy := listenDrop(t, group, Config{}, dropFirst(func(s uint64) bool {
		if s == lose {
			dropped.Add(1)
			return true
		}
		return false
	}))
	clean := listenT(t, group, Config{})
	tx := listenT(t, group, Config{FlowControl: FlowMin})
	waitReceivers(t, tx, 2)
	sendAll(t, tx, group, []*Conn{lossy, clean}, count, 64, 5*time.Second)
	require.Equal(t, uint64(1), dropped.Load(), "datagrams dropped by the test")

	waitStat(t, tx, "sender: repairs multicast", func(s Stats) uint64 { return s.RepairsMulticast }, 1)
	repairs := tx.Stats().RepairsMulticast
	waitStat(t, clean, "clean receiver: duplicates", func(s Stats) uint64 { return s.Duplicates }, repairs)
	cs := clean.Stats()
	// Another repair may go meanwhile (a NAK retried after
	// RepairInterval): each is a duplicate here.
	require.LessOrEqual(t, cs.Duplicates, tx.Stats().RepairsMulticast, "clean receiver: duplicates, at most one a repair; stats %+v", cs)
	require.Zero(t, cs.Recovered)
	require.Zero(t, cs.GapsFilled, "clean receiver: no gap, no round")

	ls := lossy.Stats()
	require.Equal(t, uint64(1), ls.Recovered, "lossy receiver; stats %+v", ls)
	require.LessOrEqual(t, ls.Duplicates, tx.Stats().RepairsMulticast-1, "lossy receiver: at most the repairs after the first; stats %+v", ls)
	require.Equal(t, uint64(1), ls.GapsFilled, "lossy receiver: one NAK round; stats %+v", ls)
	require.Positive(t, ls.RepairDelay, "lossy receiver: the round's delay")
	require.Equal(t, ls.RepairDelay, ls.RepairDelayMax, "one round: its mean is its longest")
	require.NotZero(t, ls.NAKsSent)
}

// A receiver that goes silent (a forged status, never repeated) is
// forgotten after ReceiverTimeout, and counted once. (One that closes
// says so and is not counted.)
func TestReceiverTimedOutCounted(t *testing.T) {
	group := newGroup()
	tx := listenT(t, group, Config{FlowControl: FlowMin, ReceiverTimeout: 50 * time.Millisecond})
	raw := rawConn(t, group)
	b := statusDG(9, tx.session, 0, 64)
	_, err := raw.WriteBatch([]rdmanet.Message{{Buffer: b, Addr: tx.local}})
	require.NoError(t, err)
	// The sweep that forgets it runs about every ReceiverTimeout. (Not
	// waited for first as known: a stall of the VM's emulated CPUs past
	// 50 ms would forget it before a look could see it.)
	waitStat(t, tx, "sender: receivers timed out", func(s Stats) uint64 { return s.ReceiversTimedOut }, 1)
	require.Zero(t, tx.Receivers())
	require.Equal(t, uint64(1), tx.Stats().ReceiversTimedOut, "receivers forgotten; stats %+v", tx.Stats())
}

// MessagesReceived and BytesReceived count the messages a reader got
// and their payload bytes, by ReadFrom and by ReadBatch, of one
// datagram or several; MessagesSent and BytesSent the writer's side.
func TestBytesReceivedCounted(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{})
	tx := listenT(t, group, Config{})
	sizes := []int{1, 0, 64, 3000, 10000, 700}
	total := 0
	for i, n := range sizes {
		_, err := tx.WriteTo(payload(make([]byte, n), uint64(i)), group)
		require.NoError(t, err)
		total += n
	}
	half := len(sizes) / 2
	for i := range half {
		b, _, err := readMsg(t, r)
		require.NoError(t, err)
		require.Len(t, b, sizes[i], "message %d by ReadFrom", i)
	}
	for i := half; i < len(sizes); {
		ms := make([]rdmanet.Message, len(sizes)-i)
		for k := range ms {
			ms[k].Buffer = make([]byte, 16<<10)
		}
		r.SetReadDeadline(time.Now().Add(10 * time.Second))
		k, err := r.ReadBatch(ms)
		require.NoError(t, err)
		for _, m := range ms[:k] {
			require.Equal(t, sizes[i], m.N, "message %d by ReadBatch", i)
			i++
		}
	}
	st := r.Stats()
	require.Equal(t, uint64(len(sizes)), st.MessagesReceived, "stats %+v", st)
	require.Equal(t, uint64(total), st.BytesReceived, "stats %+v", st)
	ts := tx.Stats()
	require.Equal(t, uint64(len(sizes)), ts.MessagesSent, "stats %+v", ts)
	require.Equal(t, uint64(total), ts.BytesSent, "stats %+v", ts)
}

// Stats.RTT is InitialRTT until a sender is heard, and then the largest
// smoothed round trip among the senders heard, one measured below
// InitialRTT included.
func TestStatsRTT(t *testing.T) {
	const initial = 300 * time.Microsecond
	c := listenT(t, newGroup(), Config{InitialRTT: initial})
	require.Equal(t, initial, c.Stats().RTT, "no sender heard")
	from := rdmanet.Addr{QPN: 0x4301}
	inject(c, heartbeatDG(71, 0, 0, 0, 0), from)
	c.rcv.mu.Lock()
	heard := len(c.rcv.peers)
	for _, p := range c.rcv.peers {
		p.srtt = int64(50 * time.Microsecond) // measured
	}
	c.rcv.mu.Unlock()
	require.Equal(t, 1, heard)
	require.Equal(t, 50*time.Microsecond, c.Stats().RTT, "one sender, its round trip measured")
}
