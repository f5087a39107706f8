package reliable

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-rdma/rdmanet/rdmanet"
	"github.com/stretchr/testify/require"
)

// The sender's rules for holding a NAK back (inFlight) and for paying
// for repairs (repairCredit), each at its boundary, and what Close does
// for a conn that never sent.

// Within RepairLinger every NAK is held; a unicast repair is held for
// linger; a multicast repair serves a NAK that echoes a transmission
// number before it, and one that echoes it or a later one is answered.
func TestInFlight(t *testing.T) {
	group := newGroup()
	const rl = time.Millisecond
	for _, unicast := range []bool{false, true} {
		c := listenT(t, group, Config{RepairLinger: rl, UnicastRepair: unicast})
		inFlightCase(t, &c.snd, rl, unicast)
	}
}

// inFlightCase holds s.mu for its checks (deferred: a failed check must
// not leave Close waiting for the lock).
func inFlightCase(t *testing.T, s *sender, rl time.Duration, unicast bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tx = 1000
	s.repairTx[3] = 900
	linger := int64(5 * time.Millisecond)
	require.True(t, s.inFlight(3, int64(rl)-1, 900, linger), "unicast %v: within RepairLinger", unicast)
	if unicast {
		require.True(t, s.inFlight(3, linger-1, 950, linger), "unicast: within linger")
		require.False(t, s.inFlight(3, linger, 899, linger), "unicast: linger over")
	} else {
		require.True(t, s.inFlight(3, int64(rl), 899, linger), "echo before the repair: held")
		require.False(t, s.inFlight(3, int64(rl), 900, linger), "echo of the repair itself: answered")
		require.False(t, s.inFlight(3, int64(rl), 901, linger), "echo after the repair: answered")
		s.tx = 900 + 1<<15 - 1
		require.True(t, s.inFlight(3, int64(rl), 899, linger), "the repair among the last 32768 transmissions")
		s.tx = 900 + 1<<15
		require.False(t, s.inFlight(3, int64(rl), 899, linger), "older: repaired again")
	}
}

// The repair credit: first sends earn share of their bytes, up to burst;
// an idle sender's credit refills to burst over a second; a repair is
// covered by exactly its bytes; a share < 0 is no bound.
func TestRepairCredit(t *testing.T) {
	var r repairCredit
	r.init(0.5, 1000)
	require.True(t, r.covers(1000, 0), "a full credit covers the burst")
	require.False(t, r.covers(1001, 0))
	r.spend(1000)
	require.False(t, r.covers(1, 0), "spent")
	r.earn(100)
	require.True(t, r.covers(50, 0), "100 B sent at share 0.5")
	require.False(t, r.covers(51, 0))
	r.spend(50)
	// A tenth of a second idle: a tenth of the burst.
	require.True(t, r.covers(100, int64(100*time.Millisecond)))
	require.False(t, r.covers(101, int64(100*time.Millisecond)))
	require.True(t, r.covers(1000, int64(2*time.Second)), "refilled, to burst")
	require.False(t, r.covers(1001, int64(3*time.Second)), "never past burst")
	r.earn(1 << 20)
	require.False(t, r.covers(1001, int64(3*time.Second)), "earning stops at burst")

	var free repairCredit
	free.init(-1, 1000)
	require.True(t, free.covers(1<<30, 0), "no bound")
	free.spend(1 << 30)
	require.True(t, free.covers(1<<30, 0))

	var none repairCredit
	none.init(0, 1000)
	none.spend(1000)
	none.earn(1 << 20)
	require.False(t, none.covers(1, 0), "share 0 earns nothing")

	// The refill counts every nanosecond: at a burst of 10^9 bytes, one
	// nanosecond idle refills one byte.
	var fine repairCredit
	fine.init(0.5, 1e9)
	fine.spend(1e9)
	require.False(t, fine.covers(1, 0), "spent")
	require.True(t, fine.covers(1, 1), "got no byte refilled in a nanosecond, want 1")
	fine.spend(1)
	require.False(t, fine.covers(1, 1), "spent again at the same instant")
	require.True(t, fine.covers(1, 2), "got no byte refilled in the next nanosecond, want 1")
}

// A conn that never sent has nothing to linger for: Close announces no
// end (no heartbeat) and does not wait for receivers to speak up (four
// status intervals, here 4 s).
func TestCloseUnsentNoLinger(t *testing.T) {
	group := newGroup()
	// Idle heartbeats run from Listen (100 µs, doubling): a second apart
	// here, so that one counted is Close's.
	c := listenT(t, group, Config{Linger: 10 * time.Second, StatusInterval: time.Second,
		HeartbeatInterval: time.Second, HeartbeatMax: time.Minute})
	before := c.Stats().Heartbeats
	start := time.Now()
	require.NoError(t, c.Close())
	took := time.Since(start)
	require.Equal(t, before, c.Stats().Heartbeats, "heartbeats sent by Close of a conn that never sent")
	require.Less(t, took, 2*time.Second, "Close of a conn that never sent")
}

// low, the window start a heartbeat announces, is the first message in
// the window, an empty message (a datagram of a header only) as any
// other: announcing a later one would make a receiver that misses it
// skip it as lost instead of asking for it.
func TestSenderLowEmptyMessages(t *testing.T) {
	group := newGroup()
	for _, size := range []int{0, 64} {
		tx := listenT(t, group, Config{Window: 64, MaxMessage: 8 << 10}) // a floor under 64 at MTU 1024 (rxe)
		low := func() (uint64, uint64) {
			tx.snd.mu.Lock()
			defer tx.snd.mu.Unlock()
			return tx.snd.low()
		}
		seq, msg := low()
		require.Equal(t, [2]uint64{0, 0}, [2]uint64{seq, msg}, "size %d: nothing sent", size)
		writeN(t, tx, group, 0, 10, size)
		seq, msg = low()
		require.Equal(t, [2]uint64{0, 0}, [2]uint64{seq, msg}, "size %d: 10 sent, the window holds all", size)
		writeN(t, tx, group, 10, 100, size)
		seq, msg = low()
		require.Equal(t, [2]uint64{36, 36}, [2]uint64{seq, msg}, "size %d: 100 sent, a window of 64", size)
	}
}

// The heartbeat is due at exactly lastSend + hbEvery: a tick then sends
// it, a tick a nanosecond before does not. Heartbeats at 1 s and more
// keep the timer loop's own ticks out of the test.
func TestHeartbeatAtItsDue(t *testing.T) {
	group := newGroup()
	tx := listenT(t, group, Config{HeartbeatInterval: time.Second, HeartbeatMax: time.Minute})
	deadline := time.Now().Add(10 * time.Second)
	for tx.Stats().Heartbeats == 0 { // the first, at Listen
		require.False(t, time.Now().After(deadline), "no heartbeat at Listen")
		time.Sleep(100 * time.Microsecond)
	}
	s := &tx.snd
	s.mu.Lock()
	every := s.hbEvery
	due := s.lastSend + every
	s.mu.Unlock()
	before := tx.Stats().Heartbeats
	s.tick(due - 1)
	require.Equal(t, before, tx.Stats().Heartbeats, "a nanosecond before due")
	s.tick(due)
	require.Equal(t, before+1, tx.Stats().Heartbeats, "at due")
	// An idle sender's heartbeats back off, doubling up to HeartbeatMax.
	s.mu.Lock()
	got := s.hbEvery
	s.mu.Unlock()
	require.Equal(t, min(2*every, int64(time.Minute)), got, "the interval after a heartbeat (was %v)", time.Duration(every))
	for range 10 {
		s.mu.Lock()
		due = s.lastSend + s.hbEvery
		s.mu.Unlock()
		s.tick(due)
	}
	s.mu.Lock()
	got = s.hbEvery
	s.mu.Unlock()
	require.Equal(t, int64(time.Minute), got, "HeartbeatMax")
}

// While a write waits for its receivers (waitHeartbeats), the heartbeats
// back off from HeartbeatInterval to 4 StatusIntervals, not to
// HeartbeatMax. Ticks at each due, with the sender's last send an hour
// ahead of the clock, keep the timer loop's own ticks out of the test.
func TestWaitingHeartbeatsCapAtFourStatusIntervals(t *testing.T) {
	group := newGroup()
	tx := listenT(t, group, Config{HeartbeatInterval: time.Second, StatusInterval: time.Second, HeartbeatMax: time.Minute})
	s := &tx.snd
	every := func() int64 {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.hbEvery
	}
	tickDue := func() {
		s.mu.Lock()
		due := s.lastSend + s.hbEvery
		s.mu.Unlock()
		s.tick(due)
	}
	before := tx.Stats().Heartbeats
	s.tick(tx.now() + int64(time.Hour)) // lastSend an hour ahead of the clock from here on
	require.Greater(t, tx.Stats().Heartbeats, before, "a heartbeat an hour on")
	s.mu.Lock()
	s.waitHeartbeats(true)
	s.mu.Unlock()
	require.Equal(t, int64(time.Second), every(), "a wait starts at HeartbeatInterval")
	var got []time.Duration
	for range 4 {
		tickDue()
		got = append(got, time.Duration(every()))
	}
	require.Equal(t, []time.Duration{2 * time.Second, 4 * time.Second, 4 * time.Second, 4 * time.Second}, got,
		"the intervals while a write waits: doubling up to 4 StatusIntervals")
	s.mu.Lock()
	s.waitHeartbeats(false)
	s.mu.Unlock()
	tickDue()
	require.Equal(t, int64(8*time.Second), every(), "the wait over, doubling towards HeartbeatMax again")
}

// A sender knows at most 4 MaxSenders receivers: the status of one more
// is not recorded (a forger's stream of sessions costs it bounded
// memory), while those it knows stay known.
func TestSenderKnowsAtMostFourMaxSendersReceivers(t *testing.T) {
	group := newGroup()
	tx := listenT(t, group, Config{MaxSenders: 2, ReceiverTimeout: time.Hour})
	from := func(i int) rdmanet.Addr { return rdmanet.Addr{QPN: uint32(0x5100 + i)} }
	for i := range 10 {
		inject(tx, statusDG(uint32(200+i), tx.session, 0, 64), from(i))
		require.Equal(t, min(i+1, 8), tx.Receivers(), "after the status of receiver %d", i)
	}
	tx.snd.mu.Lock()
	n := len(tx.snd.receivers)
	_, first := tx.snd.receivers[peerKey{addr: from(0), session: 200}]
	_, ninth := tx.snd.receivers[peerKey{addr: from(8), session: 208}]
	tx.snd.mu.Unlock()
	require.Equal(t, 8, n, "receivers recorded")
	require.True(t, first, "the first receiver known")
	require.False(t, ninth, "the ninth receiver recorded")
}

// write posts a batch when the next message would not fit: s.msgs full,
// or one slot twice (a window smaller than s.msgs). A batch of exactly
// as many datagrams as fit goes in one post, one more splits there. The
// send hook sees each datagram staged, with the sends posted before it:
// a datagram staged after a post sees that post's datagrams counted.
// Heartbeats are posted under the sender's lock too, so none comes
// between the datagrams of one write; the count is taken from the
// write's first datagram staged, as one may come before it.
func TestWriteBatchPostsWhenFull(t *testing.T) {
	for _, tc := range []struct {
		what string
		cfg  Config
		fit  func(c *Conn) int // datagrams a post holds
	}{
		{"s.msgs full", Config{}, func(c *Conn) int { return len(c.snd.msgs) }},
		{"the window full", Config{Window: 16, MaxMessage: 1024}, func(c *Conn) int { return int(c.snd.wi.n) }},
		{"64 a post for messages of a datagram or two", Config{MaxMessage: 1024}, func(*Conn) int { return 64 }},
	} {
		t.Run(tc.what, func(t *testing.T) {
			c := listenT(t, newGroup(), tc.cfg)
			fit := tc.fit(c)
			var posted []uint64 // per datagram staged: SendsPosted then
			c.sendHook = func(seq uint64, repair bool, at int64) {
				if !repair {
					posted = append(posted, c.conn.SendsPosted())
				}
			}
			for _, n := range []int{fit, fit + 1} {
				posted = posted[:0]
				before := c.Stats().DatagramsSent
				ms := batchT(n, 10) // one datagram each, to the group
				k, err := c.WriteBatch(ms)
				require.NoError(t, err)
				require.Equal(t, n, k, "messages written")
				require.Equal(t, before+uint64(n), c.Stats().DatagramsSent, "datagrams sent by the write")
				require.Len(t, posted, n, "datagrams staged")
				base := posted[0]
				for i, p := range posted {
					want := base
					if i >= fit {
						want = base + uint64(fit) // the first post, of fit datagrams
					}
					require.Equal(t, want, p, "%d messages: datagram %d staged after %d sends, want %d", n, i, p-base, want-base)
				}
				require.GreaterOrEqual(t, c.conn.SendsPosted(), base+uint64(n), "sends posted by the write")
			}
		})
	}
}

// A sender's start (starting) is its first startSpan and its first
// window: the datagrams that take it up to Window are in it, the next
// one is not, and nothing is once startSpan has passed.
func TestStartingEnds(t *testing.T) {
	before := time.Now()
	c := listenT(t, newGroup(), Config{Window: 16, MaxMessage: 1024})
	s := &c.snd
	s.mu.Lock()
	defer s.mu.Unlock()
	now := c.now()
	require.Greater(t, s.startUntil, now)
	require.LessOrEqual(t, s.startUntil, int64(startSpan)+int64(time.Since(before)), "startSpan from the conn's making")
	require.True(t, s.starting(1, now))
	require.True(t, s.starting(16, now), "up to the window's last datagram")
	require.False(t, s.starting(17, now), "past the first window")
	require.True(t, s.starting(1, s.startUntil-1))
	require.False(t, s.starting(1, s.startUntil), "after startSpan")
}

// The data a sender writes in its start say so up to its window's last
// datagram, and not past it: each message is marked by where it ends.
func TestStartMarkedUpToTheWindow(t *testing.T) {
	group := newGroup()
	var mu sync.Mutex
	marked := map[uint64]bool{} // data seq -> start marker, as r received it (a repair resends the slot as sent)
	r := listenDrop(t, group, Config{}, func(b []byte) bool {
		var h header
		if _, err := decode(b, &h); err == nil && h.kind == kindData {
			mu.Lock()
			marked[h.seq] = h.start()
			mu.Unlock()
		}
		return false
	})
	tx := listenT(t, group, Config{Window: 16, MaxMessage: 1024})
	waitReceivers(t, tx, 1)
	const count = 18 // one datagram each: seq 0..17
	for i := range count {
		_, err := tx.WriteTo(payload(make([]byte, 64), uint64(i)), group)
		require.NoError(t, err)
	}
	_, err := readAll(r, count, 64, 10*time.Second)
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	for seq := uint64(0); seq < count; seq++ {
		require.Contains(t, marked, seq)
		require.Equal(t, seq < 16, marked[seq], "seq %d: in the start only within the window of 16", seq)
	}
}

// A write whose post fails part way counts as written exactly the
// messages any of whose datagrams was posted, and takes the others back
// out of the window (send.go: unstage), so the caller writes those
// again and a receiver reads every message once, in order. The posts
// fail after 0 datagrams, after 1 (the end of a0), and after the first
// of a1's two; the last leaves a1's second datagram to a repair. Seed
// 114: unstage's `at < sent` -> `<=`, on no test's line, counted the
// message after a boundary as written too.
func TestWritePostFailsTakesBack(t *testing.T) {
	group := newGroup()
	rx := listenT(t, group, Config{})
	tx := listenT(t, group, Config{})
	a := [][]byte{payload(make([]byte, 100), 0), payload(make([]byte, 3*tx.frag/2), 1), payload(make([]byte, 100), 2)}
	msgs := func(from int) []rdmanet.Message {
		var ms []rdmanet.Message
		for _, b := range a[from:] {
			ms = append(ms, rdmanet.Message{Buffer: b})
		}
		return ms
	}
	fail := errors.New("post failed")
	posts := 0 // datagrams the next post sends before it fails; -1: all
	tx.postHook = func(ms []rdmanet.Message) (int, error) {
		if posts < 0 {
			return tx.conn.WriteBatch(ms)
		}
		n, err := tx.conn.WriteBatch(ms[:posts])
		require.NoError(t, err)
		require.Equal(t, posts, n)
		return n, fail
	}
	next := func() (uint64, uint64) {
		tx.snd.mu.Lock()
		defer tx.snd.mu.Unlock()
		return tx.snd.next, tx.snd.nextMsg
	}
	for _, c := range []struct {
		from, posts, written int
		next, nextMsg        uint64
	}{
		{0, 0, 0, 0, 0}, // nothing posted: nothing written
		{0, 1, 1, 1, 1}, // a0 posted, a1 and a2 taken back
		{1, 1, 1, 3, 2}, // a1's first datagram posted: a1 written
		{2, -1, 1, 4, 3},
	} {
		posts = c.posts
		n, err := tx.WriteBatch(msgs(c.from))
		if c.posts >= 0 {
			require.ErrorIs(t, err, fail, "from a%d, %d posted", c.from, c.posts)
		} else {
			require.NoError(t, err)
		}
		require.Equal(t, c.written, n, "written, from a%d, %d posted", c.from, c.posts)
		seq, msg := next()
		require.Equal(t, c.next, seq, "the next seq, from a%d, %d posted", c.from, c.posts)
		require.Equal(t, c.nextMsg, msg, "the next message, from a%d, %d posted", c.from, c.posts)
	}
	require.Equal(t, uint64(3), tx.Stats().MessagesSent)
	for i, want := range a {
		b, _, err := readMsg(t, rx)
		require.NoError(t, err, "message %d", i)
		require.Equal(t, want, b, "message %d", i)
	}
	st := rx.Stats()
	require.Zero(t, st.MessagesLost, "stats %+v", st)
	require.Equal(t, uint64(3), st.MessagesReceived, "stats %+v", st)
	require.NotZero(t, st.Recovered, "a1's second datagram, by repair; stats %+v", st)
}

// A datagram sent in the sender's start and repaired after it goes out
// unmarked: a receiver that first hears the sender by that repair starts
// where it joins, not at seq 0.
func TestRepairAfterTheStartUnmarked(t *testing.T) {
	group := newGroup()
	var hold atomic.Bool // r loses every transmission of seq 0 while set
	hold.Store(true)
	r := listenDrop(t, group, Config{}, func(b []byte) bool {
		var h header
		_, err := decode(b, &h)
		return err == nil && hold.Load() && h.kind == kindData && h.seq == 0
	})
	tx := listenT(t, group, Config{})
	waitReceivers(t, tx, 1)
	_, err := tx.WriteTo(payload(make([]byte, 64), 0), group)
	require.NoError(t, err)
	flags := func() byte {
		tx.snd.mu.Lock()
		defer tx.snd.mu.Unlock()
		return tx.snd.slot(0)[1]
	}
	require.NotZero(t, flags()&flagStart, "seq 0 was sent in the start")
	tx.snd.mu.Lock()
	tx.snd.startUntil = 0 // the start is over
	before := tx.Stats().RepairsMulticast
	tx.snd.mu.Unlock()
	waitCond(t, "a repair of seq 0 after the start", func() bool { return tx.Stats().RepairsMulticast > before })
	f := flags()
	require.NotZero(t, f&flagRepair)
	require.Zero(t, f&flagStart, "a repair after the start carries no start marker")
	hold.Store(false)
	losses, err := readAll(r, 1, 64, 10*time.Second)
	require.NoError(t, err)
	require.Zero(t, losses)
}
