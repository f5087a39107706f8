package reliable

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// The protocol's boundaries, each met exactly: one datagram lost at the
// head of a stream, at its tail, at a fragment edge; a sender exactly
// RecvWindow ahead of a reader that does not read, and exactly Window
// ahead of a gap; exactly MaxSenders senders; a deadline exactly now;
// and how soon delivery resumes after a loss report. What is checked is
// what the package documents: every message once and in order, or a
// LossError at its place, and the counters the protocol makes exact.

// dropKind drops the datagrams whose decoded header lose returns true
// for, before the conn sees them.
func dropKind(lose func(h *header) bool) func([]byte) bool {
	return func(b []byte) bool {
		var h header
		if _, err := decode(b, &h); err != nil {
			return false
		}
		return lose(&h)
	}
}

// One datagram lost, exactly, at a boundary of the stream: repaired, with
// every message delivered once and in order and no loss reported. FlowMin
// senders announce themselves before the first write, so a receiver
// knows the stream's head (seq 0) before it arrives.
func TestOneDatagramLostAtBoundary(t *testing.T) {
	type tc struct {
		name    string
		count   int
		size    func(frag int) int
		lose    func(frag int, count int) uint64 // the seq to lose
		flowMax bool                             // FlowMax with FromWindowStart: the head of a sender heard late
	}
	one := func(int) int { return 100 }
	two := func(frag int) int { return frag + frag/2 }
	cases := []tc{
		{name: "tail/1-frag", count: 100, size: one, lose: func(_, n int) uint64 { return uint64(n - 1) }},
		{name: "tail/2-frag-last", count: 100, size: two, lose: func(_, n int) uint64 { return uint64(2*n - 1) }},
		{name: "tail/2-frag-first", count: 100, size: two, lose: func(_, n int) uint64 { return uint64(2*n - 2) }},
		{name: "head/1-frag", count: 100, size: one, lose: func(int, int) uint64 { return 0 }},
		{name: "head/2-frag-first", count: 100, size: two, lose: func(int, int) uint64 { return 0 }},
		{name: "head/window-start", count: 100, size: one, lose: func(int, int) uint64 { return 0 }, flowMax: true},
		{name: "head-and-tail/only-message", count: 1, size: one, lose: func(int, int) uint64 { return 0 }},
		{name: "middle/2-frag-last", count: 100, size: two, lose: func(int, int) uint64 { return 2*50 + 1 }},
		{name: "middle/2-frag-first", count: 100, size: two, lose: func(int, int) uint64 { return 2 * 50 }},
		// A message exactly one datagram long, then one a byte longer
		// whose second datagram carries that byte: lose the byte.
		{name: "edge/frag-exact", count: 100, size: func(frag int) int { return frag }, lose: func(int, int) uint64 { return 50 }},
		{name: "edge/frag-plus-one", count: 100, size: func(frag int) int { return frag + 1 }, lose: func(int, int) uint64 { return 2*50 + 1 }},
		{name: "edge/frag-plus-one-tail", count: 100, size: func(frag int) int { return frag + 1 }, lose: func(_, n int) uint64 { return uint64(2*n - 1) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			group := newGroup()
			var lost atomic.Uint64
			var seqLost atomic.Uint64
			seqLost.Store(^uint64(0))
			rcfg := Config{MaxMessage: 8 << 10, FromWindowStart: c.flowMax}
			r := listenDrop(t, group, rcfg, dropFirst(func(s uint64) bool {
				if s == seqLost.Load() {
					lost.Add(1)
					return true
				}
				return false
			}))
			cfg := Config{MaxMessage: 8 << 10, FlowControl: FlowMin}
			if c.flowMax {
				cfg.FlowControl = FlowMax
			}
			tx := listenT(t, group, cfg)
			size := c.size(tx.frag)
			seqLost.Store(c.lose(tx.frag, c.count))
			if !c.flowMax {
				waitReceivers(t, tx, 1)
			}
			sendAll(t, tx, group, []*Conn{r}, c.count, size, 3*time.Second)
			rs := r.Stats()
			require.Equal(t, uint64(1), lost.Load(), "datagrams dropped by the test")
			require.Equal(t, uint64(c.count), rs.MessagesReceived)
			require.Zero(t, rs.LossesReported)
			require.Equal(t, uint64(1), rs.Recovered, "datagrams recovered by repair; receiver %+v", rs)
			require.Zero(t, rs.Overruns)
		})
	}
}

// A FlowMax sender exactly RecvWindow datagrams ahead of a receiver that
// does not read fills its window; one datagram more is beyond it:
// dropped (one overrun) and asked for again once reading makes room.
// Either way every message is read, in order, with no loss reported.
func TestRecvWindowBoundary(t *testing.T) {
	const rw = 64
	for _, extra := range []int{0, 1} {
		t.Run(fmt.Sprintf("window+%d", extra), func(t *testing.T) {
			group := newGroup()
			r := listenT(t, group, Config{MaxMessage: 8 << 10, RecvWindow: rw})
			tx := listenT(t, group, Config{MaxMessage: 8 << 10})
			// The receiver must know the sender before the count starts:
			// a first message, read.
			writeN(t, tx, group, 0, 1, 64)
			require.Equal(t, uint64(0), readOne(t, r, 64))
			n := uint64(rw + extra)
			writeN(t, tx, group, 1, 1+n, 64)
			if extra > 0 {
				// Nothing is read yet: the datagram past the window is
				// dropped as it arrives.
				deadline := time.Now().Add(5 * time.Second)
				for r.Stats().Overruns < uint64(extra) {
					if time.Now().After(deadline) {
						t.Fatalf("overruns: got %d, want %d, with %d datagrams sent to a %d-datagram receive window not read; receiver %+v",
							r.Stats().Overruns, extra, n, rw, r.Stats())
					}
					time.Sleep(time.Millisecond)
				}
			}
			for want := uint64(1); want < 1+n; want++ {
				buf := make([]byte, 1024)
				r.SetReadDeadline(time.Now().Add(3 * time.Second))
				k, _, err := r.ReadFrom(buf)
				require.NoError(t, err, "message %d of %d; receiver %+v", want, n, r.Stats())
				i, err := checkMessage(buf[:k], 64)
				require.NoError(t, err)
				require.Equal(t, want, i)
			}
			rs := r.Stats()
			require.Equal(t, uint64(extra), rs.Overruns, "datagrams beyond the receive window")
			require.Zero(t, rs.LossesReported)
			require.Equal(t, uint64(extra), rs.Recovered, "the overrun datagram, repaired")
		})
	}
}

// A NAK for the oldest datagram the sender's window still holds is
// repaired; one for the datagram just before it is answered "lost", and
// the receiver reports exactly that one message lost, at its place.
// The sender's window is 64 datagrams; the receiver loses datagram 1, and
// its NAKs reach the sender only once it has written 64 (at the edge) or
// 65 (one past) datagrams after it.
func TestSenderWindowBoundary(t *testing.T) {
	const w = 64
	for _, past := range []bool{false, true} {
		t.Run(map[bool]string{false: "at-edge", true: "one-past"}[past], func(t *testing.T) {
			group := newGroup()
			r := listenDrop(t, group, Config{MaxMessage: 8 << 10}, dropFirst(func(s uint64) bool { return s == 1 }))
			var hold atomic.Bool
			tx := listenDrop(t, group, Config{MaxMessage: 8 << 10, Window: w},
				dropKind(func(h *header) bool { return h.kind == kindNAK && hold.Load() }))
			writeN(t, tx, group, 0, 1, 64)
			require.Equal(t, uint64(0), readOne(t, r, 64)) // the receiver knows the sender
			hold.Store(true)
			last := uint64(1 + w) // messages 1..w: seq 1 is the window's oldest
			if past {
				last++
			}
			writeN(t, tx, group, 1, last, 64)
			hold.Store(false) // the receiver's next NAK retry gets through
			buf := make([]byte, 1024)
			var losses []uint64
			for want := uint64(1); want < last; {
				r.SetReadDeadline(time.Now().Add(3 * time.Second))
				n, _, err := r.ReadFrom(buf)
				var le *LossError
				if errors.As(err, &le) {
					losses = append(losses, want)
					require.Equal(t, uint64(1), le.Messages, "messages lost at %d", want)
					want += le.Messages
					continue
				}
				require.NoError(t, err, "message %d; receiver %+v; sender %+v", want, r.Stats(), tx.Stats())
				i, err := checkMessage(buf[:n], 64)
				require.NoError(t, err)
				require.Equal(t, want, i)
				want++
			}
			if past {
				// Learnt from a "lost" answer or from a heartbeat,
				// which names the window's start too.
				require.Equal(t, []uint64{1}, losses, "loss reports (at the message)")
			} else {
				require.Empty(t, losses, "loss reports for a datagram still in the window")
				require.Equal(t, uint64(1), r.Stats().Recovered)
				require.Zero(t, tx.Stats().LostSent, "\"lost\" answers to NAKs for what the window holds")
			}
		})
	}
}

// Exactly MaxSenders senders are all tracked: every message of each is
// read once, in its sender's order, and nothing is dropped as foreign.
func TestExactlyMaxSenders(t *testing.T) {
	const senders, count = 3, 50
	group := newGroup()
	r := listenT(t, group, Config{MaxSenders: senders})
	txs := make([]*Conn, senders)
	for i := range txs {
		txs[i] = listenT(t, group, Config{})
	}
	for _, tx := range txs {
		writeN(t, tx, group, 0, count, 64)
	}
	next := map[string]uint64{}
	buf := make([]byte, 1024)
	for k := 0; k < senders*count; k++ {
		r.SetReadDeadline(time.Now().Add(3 * time.Second))
		n, from, err := r.ReadFrom(buf)
		require.NoError(t, err, "message %d of %d; receiver %+v", k, senders*count, r.Stats())
		i, err := checkMessage(buf[:n], 64)
		require.NoError(t, err)
		require.Equal(t, next[from.String()], i, "from %v", from)
		next[from.String()]++
	}
	require.Len(t, next, senders)
	rs := r.Stats()
	require.Zero(t, rs.Foreign, "datagrams dropped as foreign with exactly MaxSenders senders")
	require.Zero(t, rs.LossesReported)
}

// A deadline exactly now: a read with nothing ready, and a FlowMin write
// that must wait for the receiver, fail at once with a timeout.
func TestDeadlineExactlyNow(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{MaxMessage: 8 << 10, RecvWindow: 64, StatusInterval: time.Hour})
	tx := listenT(t, group, Config{MaxMessage: 8 << 10, FlowControl: FlowMin, Window: 64, ReceiverTimeout: time.Hour})
	isTimeout := func(err error, what string) {
		t.Helper()
		require.ErrorIs(t, err, os.ErrDeadlineExceeded, what)
		var ne net.Error
		require.True(t, errors.As(err, &ne) && ne.Timeout(), "%s: Timeout() on %v", what, err)
	}
	within := func(start time.Time, what string) {
		t.Helper()
		require.Less(t, time.Since(start), time.Second, "%s with a deadline of now: it waited", what)
	}

	start := time.Now()
	require.NoError(t, r.SetReadDeadline(start))
	_, _, err := r.ReadFrom(make([]byte, 100))
	isTimeout(err, "ReadFrom")
	within(start, "ReadFrom")
	start = time.Now()
	require.NoError(t, r.SetReadDeadline(start))
	_, err = r.ReadBatch(make([]rdmanet.Message, 1))
	isTimeout(err, "ReadBatch")
	within(start, "ReadBatch")
	require.NoError(t, r.SetReadDeadline(time.Time{}))

	waitReceivers(t, tx, 1)
	writeN(t, tx, group, 0, 64, 64) // the receiver's whole window
	start = time.Now()
	require.NoError(t, tx.SetWriteDeadline(start))
	_, err = tx.WriteTo(make([]byte, 64), group)
	isTimeout(err, "WriteTo into a full window")
	within(start, "WriteTo")
}

// After a loss report the sender's next message, already held, is read at
// once: reading resumes on the report, not on whatever the sender sends
// next. Here it sends nothing next: its stream is written, it has gone
// quiet (the receiver drops its heartbeats from then on), and the
// receiver holds every message after the lost one. The bound, 50 ms, is
// for a loaded machine; a reader that waited for the sender would wait
// for ever here (the read deadline, 2 s, ends it), and for the next
// heartbeat (up to HeartbeatMax, 100 ms) where the heartbeats flow.
func TestResumeAfterLossReport(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(map[bool]string{false: "ReadFrom", true: "ReadBatch"}[batch], func(t *testing.T) {
			const count, lostMsg = 200, 10
			group := newGroup()
			var quiet, lostHeard, tailHeard atomic.Bool
			r := listenDrop(t, group, Config{MaxMessage: 8 << 10}, dropKind(func(h *header) bool {
				switch h.kind {
				case kindData:
					return h.seq == lostMsg // every transmission
				case kindLost:
					// One answer is all the receiver needs; more
					// would wake it again.
					return lostHeard.Swap(true)
				case kindHeartbeat:
					if quiet.Load() {
						return true
					}
					if h.seq >= count {
						tailHeard.Store(true) // every datagram before it was handled
					}
				}
				return false
			}))
			tx := listenT(t, group, Config{MaxMessage: 8 << 10, Window: 64})
			writeN(t, tx, group, 0, 1, 64)
			require.Equal(t, uint64(0), readOne(t, r, 64))
			writeN(t, tx, group, 1, count, 64)
			deadline := time.Now().Add(10 * time.Second)
			for !lostHeard.Load() || !tailHeard.Load() {
				if time.Now().After(deadline) {
					t.Fatalf("after 10 s: lost answer heard %v, heartbeat after the stream heard %v; receiver %+v; sender %+v",
						lostHeard.Load(), tailHeard.Load(), r.Stats(), tx.Stats())
				}
				time.Sleep(time.Millisecond)
			}
			quiet.Store(true)

			buf := make([]byte, 1024)
			ms := []rdmanet.Message{{Buffer: buf}}
			read := func() (int, error) {
				r.SetReadDeadline(time.Now().Add(2 * time.Second))
				if batch {
					k, err := r.ReadBatch(ms)
					if k == 1 {
						return ms[0].N, err
					}
					return 0, err
				}
				n, _, err := r.ReadFrom(buf)
				return n, err
			}
			for want := uint64(1); want < lostMsg; want++ {
				n, err := read()
				require.NoError(t, err)
				i, err := checkMessage(buf[:n], 64)
				require.NoError(t, err)
				require.Equal(t, want, i)
			}
			_, err := read()
			var le *LossError
			require.True(t, errors.As(err, &le), "at message %d: got %v, want a *LossError", lostMsg, err)
			require.Equal(t, uint64(1), le.Messages)
			reported := time.Now()
			n, err := read()
			gap := time.Since(reported)
			require.NoError(t, err, "the message after the loss report, held by the receiver, not read %v after the report", gap)
			i, err := checkMessage(buf[:n], 64)
			require.NoError(t, err)
			require.Equal(t, uint64(lostMsg+1), i)
			require.Less(t, gap, 50*time.Millisecond, "the message after the loss report came that long after it")
			t.Logf("the message after the loss report came %v after it", gap)
			for want := uint64(lostMsg + 2); want < count; want++ {
				n, err := read()
				require.NoError(t, err)
				i, err := checkMessage(buf[:n], 64)
				require.NoError(t, err)
				require.Equal(t, want, i)
			}
		})
	}
}
