package reliable

import (
	"encoding/binary"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-rdma/rdmanet/rdmanet"
	"github.com/stretchr/testify/require"
)

// rxOwnerOf is who reads c's underlying conn.
func rxOwnerOf(c *Conn) rxOwner {
	c.rx.mu.Lock()
	defer c.rx.mu.Unlock()
	return c.rx.owner
}

// A reader takes the underlying conn over; once it stops reading, the
// receive loop gets it back and the conn's sending half still answers
// NAKs: a conn that read one message and then only writes repairs what
// its receiver lost, and Close still lingers for it.
func TestReaderHandsConnBack(t *testing.T) {
	group := newGroup()
	a := listenT(t, group, Config{})
	b := listenT(t, group, Config{})
	c := listenDrop(t, group, Config{}, dropFirst(func(s uint64) bool { return s%7 == 3 }))
	time.Sleep(20 * time.Millisecond)

	// a reads one message of b's, and a second read waits: a reads its
	// conn itself while it waits.
	msg := make([]byte, 64)
	_, err := b.WriteTo(payload(msg, 0), group)
	require.NoError(t, err)
	buf := make([]byte, 1024)
	for _, r := range []*Conn{a, c} {
		r.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, _, err = r.ReadFrom(buf)
		require.NoError(t, err)
	}
	a.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	done := make(chan error, 1)
	go func() {
		_, _, err := a.ReadFrom(buf)
		done <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		a.rx.mu.Lock()
		owner, blocked := a.rx.owner, a.rx.blocked
		a.rx.mu.Unlock()
		if blocked {
			require.Equal(t, rxReader, owner)
			break
		}
		require.True(t, time.Now().Before(deadline), "the reader did not read the conn itself in 5 s")
		time.Sleep(100 * time.Microsecond)
	}
	require.ErrorIs(t, <-done, os.ErrDeadlineExceeded)

	// a reads no more: the receive loop takes its conn back.
	deadline = time.Now().Add(5 * time.Second)
	for rxOwnerOf(a) != rxLoop {
		require.True(t, time.Now().Before(deadline), "the receive loop did not get the conn back in 5 s")
		time.Sleep(time.Millisecond)
	}

	// a writes; c loses every 7th datagram and NAKs a, whose app never
	// reads again: its receive loop serves the repairs.
	const count = 500
	errc := make(chan error, 1)
	go func() {
		_, err := readAll(c, count, 64, 5*time.Second)
		errc <- err
	}()
	for i := uint64(0); i < count; i++ {
		_, err := a.WriteTo(payload(msg, i), group)
		require.NoError(t, err)
	}
	require.NoError(t, <-errc)
	require.NotZero(t, c.Stats().NAKsSent)
	require.NotZero(t, a.Stats().RepairsMulticast)
	require.Zero(t, c.Stats().LossesReported)
}

// A publisher that joins send-only (rdmanet.ListenConfig.SendOnly) does
// not receive the group, its own multicast included, and still hears
// NAKs and status by unicast: receivers that lose datagrams get every
// message once and in order, repaired.
func TestSendOnlySender(t *testing.T) {
	group := newGroup()
	rx := []*Conn{
		listenDrop(t, group, Config{}, dropFirst(func(s uint64) bool { return s%11 == 4 })),
		listenDrop(t, group, Config{}, dropFirst(func(s uint64) bool { return s%17 == 9 })),
	}
	lc := ListenConfig{Conn: *testListenConfig(), Config: Config{FlowControl: FlowMin}}
	lc.Conn.SendOnly = true
	tx, err := lc.ListenMulticast(t.Context(), "rdma", nil, group)
	require.NoError(t, err)
	t.Cleanup(func() { tx.Close() })
	time.Sleep(20 * time.Millisecond)
	waitReceivers(t, tx, 2)
	sendAll(t, tx, group, rx, 2000, 64, 5*time.Second)
	require.NotZero(t, tx.Stats().NAKsReceived)
	require.NotZero(t, tx.Stats().RepairsMulticast)
}

// A ReadFrom that reads the conn itself takes its sender's next whole
// message straight into its buffer, and the window path takes over
// around a gap: every message once and in order, with some of each.
func TestReadFromDirect(t *testing.T) {
	group := newGroup()
	tx := listenT(t, group, Config{FlowControl: FlowMin})
	// Every 50th data datagram is lost once: what follows it waits in
	// the window for the repair, then is read from there.
	rx := listenDrop(t, group, Config{}, dropFirst(func(s uint64) bool { return s%50 == 17 }))
	time.Sleep(20 * time.Millisecond)
	waitReceivers(t, tx, 1)
	const count, size = 2000, 100
	errc := make(chan error, 1)
	go func() {
		msg := make([]byte, size)
		for i := range uint64(count) {
			if _, err := tx.WriteTo(payload(msg, i), group); err != nil {
				errc <- err
				return
			}
			if i%8 == 0 {
				time.Sleep(50 * time.Microsecond) // let the reader wait, so it reads the conn itself
			}
		}
		errc <- nil
	}()
	buf := make([]byte, 1024)
	short := make([]byte, 10)
	for i := range uint64(count) {
		rx.SetReadDeadline(time.Now().Add(5 * time.Second))
		b := buf
		if i == 1000 {
			b = short // a truncated message, direct or not, as UDP truncates
		}
		n, from, err := rx.ReadFrom(b)
		require.NoError(t, err, "message %d", i)
		require.Equal(t, tx.LocalAddr().String(), from.String())
		if i == 1000 {
			require.Equal(t, len(short), n)
			require.Equal(t, i, binary.LittleEndian.Uint64(short))
			continue
		}
		got, err := checkMessage(buf[:n], size)
		require.NoError(t, err)
		require.Equal(t, i, got, "order")
	}
	require.NoError(t, <-errc)
	st := rx.Stats()
	direct := rx.stats.direct.Load()
	t.Logf("%d messages: %d direct into the reader's buffer, %d recovered by repair, truncated %d", count, direct, st.Recovered, st.Truncated)
	require.Equal(t, uint64(count), st.MessagesReceived)
	require.Equal(t, uint64(1), st.Truncated)
	// How many go direct depends on the scheduling (a loaded machine
	// reads more from the window); that both paths run does not.
	require.NotZero(t, direct, "the direct path was never taken")
	require.Less(t, direct, uint64(count), "every message direct: the window path was not exercised")
	require.NotZero(t, st.Recovered)
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

// A reader that left ReadFrom holding the underlying conn keeps it for
// 200 µs (rxAway) after it left: the timer loop's rxGiveBack leaves it to
// the reader a nanosecond before, says when to look again, and takes it
// back at 200 µs; the receive loop then reads again. The reader's
// leaving is set an hour ahead of the clock, and StatusInterval and the
// heartbeats are long, so that the timer loop's own looks stay away.
func TestReaderRelievedAtRxAway(t *testing.T) {
	const away = int64(200 * time.Microsecond)
	group := newGroup()
	r := listenT(t, group, Config{StatusInterval: time.Hour, HeartbeatInterval: time.Second, HeartbeatMax: time.Minute})
	raw := rawConn(t, group)
	x := &r.rx
	locked := rxLocked(r)
	var left int64
	for try := 0; left == 0; try++ {
		require.Less(t, try, 10, "the timer loop took the conn back each time before the test could look")
		done := make(chan error, 1)
		go func() {
			_, _, err := r.ReadFrom(make([]byte, 64))
			x.mu.Lock()
			if x.owner == rxReader && !x.in { // not taken back yet
				left = r.now() + int64(time.Hour)
				x.away = left
			}
			x.mu.Unlock()
			done <- err
		}()
		handOverToReader(t, r, raw, group)
		require.NoError(t, r.SetReadDeadline(time.Now()))
		require.ErrorIs(t, <-done, os.ErrDeadlineExceeded)
		require.NoError(t, r.SetReadDeadline(time.Time{}))
		if left == 0 {
			waitCond(t, "the receive loop reads again", locked(func() bool { return x.owner == rxLoop }))
		}
	}
	require.Equal(t, left+away, r.rxGiveBack(left+away-1, false), "a nanosecond before rxAway: look again at rxAway")
	require.Equal(t, rxReader, rxOwnerOf(r), "a nanosecond before rxAway")
	require.Zero(t, r.rxGiveBack(left+away, false), "at rxAway")
	require.Equal(t, rxLoop, rxOwnerOf(r), "at rxAway")
	// The receive loop reads the conn again: a datagram nobody reads is
	// handled (a malformed one, counted).
	before := r.Stats().Malformed
	_, err := raw.WriteTo([]byte("not ours"), group)
	require.NoError(t, err)
	waitStat(t, r, "malformed datagrams", func(s Stats) uint64 { return s.Malformed }, before+1)
}

// The receive loop takes up to 32 datagrams from the underlying conn a
// poll (recvBatch), each in a batch buffer of its own: with 60
// datagrams queued while the loop is held in the handling of one, a
// later poll fills all 32 buffers and none past them. Every datagram
// handled counts, not only data: on a loaded machine the sender's
// heartbeat can fall between two writes and take a buffer of the poll.
func TestReceiveLoopTakes32(t *testing.T) {
	group := newGroup()
	type handled struct {
		slot int // the batch buffer it was in; -1: none of the loop's
		data bool
	}
	var (
		rp    atomic.Pointer[Conn]
		armed atomic.Bool
		gate  = make(chan struct{})
		mu    sync.Mutex
		seen  []handled
		data  int // data datagrams handled
	)
	r := listenDrop(t, group, Config{}, func(b []byte) bool {
		c := rp.Load()
		if c == nil || !armed.Load() {
			return false
		}
		slot := -1
		for i := range c.rx.ms {
			if &c.rx.ms[i].Buffer[:1][0] == &b[0] {
				slot = i
			}
		}
		isData := b[0]&0xf == uint8(kindData)
		mu.Lock()
		first := isData && data == 0
		seen = append(seen, handled{slot, isData})
		if isData {
			data++
		}
		mu.Unlock()
		if first {
			<-gate // hold the loop: what follows queues in the conn
		}
		return false
	})
	rp.Store(r)
	tx := listenT(t, group, Config{})
	armed.Store(true)
	const count = 60
	msg := make([]byte, 64)
	for i := range count {
		_, err := tx.WriteTo(payload(msg, uint64(i)), group)
		require.NoError(t, err)
	}
	close(gate)
	waitCond(t, "every data datagram handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return data >= count
	})
	mu.Lock()
	defer mu.Unlock()
	top := -1
	for i, h := range seen {
		if h.data {
			require.GreaterOrEqual(t, h.slot, 0, "datagram %d: data in no batch buffer of the loop's, want one", i)
		}
		top = max(top, h.slot)
	}
	require.Equal(t, 31, top, "got %d buffers filled by a poll at most, want 32: %v", top+1, seen)
}

// An idle conn sleeps: with the receive loop holding the underlying conn
// and nothing sent or received, its timer loop waits for its next
// deadline rather than looking again at once. It counts its passes: an
// idle one makes a few in 300 ms (its sweeps), a loop that spins
// hundreds of thousands on the host and tens of thousands on the VM's
// emulated CPUs. (Its CPU time was the measure before: in the VM on a
// loaded host an idle process was charged 70-120 ms of 300.)
func TestIdleConnSleeps(t *testing.T) {
	c := listenT(t, newGroup(), Config{})
	require.Equal(t, rxLoop, rxOwnerOf(c), "the receive loop holds the conn")
	const wall = 300 * time.Millisecond
	const most = 3000 // one pass every 100 µs
	l0, t0 := c.looks.Load(), time.Now()
	time.Sleep(wall) // the interval measured, not a wait for an event
	looks, took := c.looks.Load()-l0, time.Since(t0)
	t.Logf("%d passes of the timer loop in %v", looks, took)
	require.Less(t, looks, uint64(most), "passes of an idle conn's timer loop in %v", took)
	// It does pass: it sends a heartbeat at least every HeartbeatMax
	// (100 ms). No pass counted would make the bound above hold for any
	// loop. Waited for, not required within the interval: a starved
	// process may take none in 300 ms.
	require.Eventually(t, func() bool { return c.looks.Load() > l0 }, 10*time.Second, time.Millisecond,
		"a pass of an idle conn's timer loop: none counted in 10 s")
}
