package reliable

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/go-rdma/rdmanet/rdmanet"

	"github.com/stretchr/testify/require"
)

// dropFirst drops the first transmission (not repairs) of the data
// datagrams for which lose(seq) is true.
func dropFirst(lose func(seq uint64) bool) func([]byte) bool {
	return func(b []byte) bool {
		var h header
		if _, err := decode(b, &h); err != nil || h.kind != kindData || h.flags&flagRepair != 0 {
			return false
		}
		return lose(h.seq)
	}
}

// dropAlways drops every transmission, repairs included, of the data
// datagrams for which lose(seq) is true.
func dropAlways(lose func(seq uint64) bool) func([]byte) bool {
	return func(b []byte) bool {
		var h header
		if _, err := decode(b, &h); err != nil || h.kind != kindData {
			return false
		}
		return lose(h.seq)
	}
}

// Receivers that miss different datagrams, and the last ones (tail loss),
// get every message once and in order through NAKs and repairs, with no
// loss reported.
func TestRepairGaps(t *testing.T) {
	group := newGroup()
	const count = 3000
	tail := func(seq uint64) bool { return seq >= 2*count-3 }
	rx := []*Conn{
		listenDrop(t, group, Config{}, dropFirst(func(s uint64) bool { return s%10 == 3 || tail(s) })),
		listenDrop(t, group, Config{}, dropFirst(func(s uint64) bool { return s%13 == 5 || (s >= 1000 && s < 1040) || tail(s) })),
	}
	// FlowMin: the sender waits for the receivers instead of running a
	// window ahead of them (which FlowMax reports as loss).
	tx := listenT(t, group, Config{FlowControl: FlowMin})
	size := tx.frag + tx.frag/2 // 2 fragments each
	time.Sleep(20 * time.Millisecond)
	waitReceivers(t, tx, 2)
	sendAll(t, tx, group, rx, count, size, 10*time.Second)
	st := tx.Stats()
	t.Logf("sender: %+v", st)
	for _, r := range rx {
		rs := r.Stats()
		t.Logf("receiver: NAKs %d dup %d lost %d rtt %v", rs.NAKsSent, rs.Duplicates, rs.MessagesLost, rs.RTT)
		require.NotZero(t, rs.NAKsSent)
		require.Zero(t, rs.LossesReported)
		require.Equal(t, uint64(count), rs.MessagesReceived)
	}
	require.NotZero(t, st.RepairsMulticast)
	require.NotZero(t, st.NAKsReceived)
}

// What leaves the window before a receiver got it is reported, each
// message once and at its place, and the messages after it are still
// delivered. (A run that leaves the window in parts is reported in parts.)
func TestLossReported(t *testing.T) {
	group := newGroup()
	const count = 1000
	r := listenDrop(t, group, Config{}, dropAlways(func(s uint64) bool { return s >= 100 && s < 300 }))
	tx := listenT(t, group, Config{MaxMessage: 8 << 10, Window: 64})
	time.Sleep(20 * time.Millisecond)
	b := make([]byte, 64)
	for i := uint64(0); i < count; i++ {
		_, err := tx.WriteTo(payload(b, i), group)
		require.NoError(t, err)
	}
	buf := make([]byte, 1024)
	want := uint64(0)
	reports := 0
	for want < count {
		r.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, from, err := r.ReadFrom(buf)
		var le *LossError
		if errors.As(err, &le) {
			reports++
			require.True(t, want >= 100 && want+le.Messages <= 300, "loss of %d reported at %d, not at the lost messages 100..299; stats %+v; conn %+v; tx %+v", le.Messages, want, r.Stats(), r.Conn().Stats(), tx.Stats())
			require.Equal(t, tx.local, le.From)
			require.Equal(t, tx.session, le.Session)
			require.Equal(t, tx.LocalAddr().String(), from.String())
			want += le.Messages
			continue
		}
		require.NoError(t, err)
		i, err := checkMessage(buf[:n], 64)
		require.NoError(t, err)
		require.Equal(t, want, i)
		want++
	}
	st := r.Stats()
	require.Equal(t, uint64(reports), st.LossesReported)
	require.Equal(t, uint64(200), st.MessagesLost)
	require.Equal(t, uint64(800), st.MessagesReceived)
}

// A NAK sent before the repair it asks for could arrive is not answered
// again, however late it reaches the sender: here the sender takes 300 µs
// over each NAK (as a loaded sender behind its receive queue), so the
// receivers' retries, timed from a 50 µs round trip (InitialRTT, set
// below the sender's delay) they have not yet measured, reach it well
// after two of their round trips. Each lost datagram is repaired once
// (the repairs are not lost).
func TestRepairOncePerLoss(t *testing.T) {
	group := newGroup()
	const count = 200
	lose := func(s uint64) bool { return s%20 == 7 } // 10 datagrams
	rx := []*Conn{
		listenDrop(t, group, Config{InitialRTT: 50 * time.Microsecond}, dropFirst(lose)),
		listenDrop(t, group, Config{InitialRTT: 50 * time.Microsecond}, dropFirst(lose)),
	}
	slowNAKs := func(b []byte) bool {
		var h header
		if _, err := decode(b, &h); err == nil && h.kind == kindNAK {
			time.Sleep(300 * time.Microsecond)
		}
		return false
	}
	tx := listenDrop(t, group, Config{FlowControl: FlowMin}, slowNAKs)
	time.Sleep(20 * time.Millisecond)
	waitReceivers(t, tx, len(rx))
	sendAll(t, tx, group, rx, count, 64, 10*time.Second)
	tx.Close() // its receive loop has stopped: the counters are final
	st := tx.Stats()
	var naks uint64
	for _, r := range rx {
		naks += r.Stats().NAKsSent
	}
	t.Logf("NAKs sent %d, received %d; repairs %d, NAKed datagrams not repeated %d", naks, st.NAKsReceived, st.RepairsMulticast, st.RepairsSuppressed)
	require.Equal(t, uint64(10), st.RepairsMulticast, "repairs of 10 lost datagrams; sender stats %+v", st)
}

// A NAK stream makes the sender resend each datagram at most once per
// RepairInterval, whatever the NAKs echo (random, 0, or the latest
// transmission number): 300 NAKs for 100 datagrams, from a conn that is
// no receiver, cause 64 repairs. (Before RepairInterval the echo chose:
// a NAK echoing a number after the repair's was answered again.) The
// repair credit is off here (RepairShare < 0): this is the interval
// alone.
func TestRepairIntervalAnyEcho(t *testing.T) {
	group := newGroup()
	tx := listenT(t, group, Config{RepairInterval: time.Second, RepairShare: -1})
	nc := rawConn(t, group) // the NAKs' sender
	const count = 64
	b := make([]byte, 64)
	for i := range uint64(count) {
		_, err := tx.WriteTo(payload(b, i), group)
		require.NoError(t, err)
	}
	sendsDone(t, tx)
	d := make([]byte, tx.mtu) // pays for 8 MTUs of repairs (wire.go: nakPays)
	ms := []rdmanet.Message{{Buffer: d, Addr: tx.local}}
	for i := range 300 {
		h := header{kind: kindNAK, session: 7, seq: 0}
		switch i % 3 {
		case 0:
			h.tx = uint16(rand.Uint32())
		case 2:
			tx.snd.mu.Lock()
			h.tx = tx.snd.tx - 1 // the latest heard
			tx.snd.mu.Unlock()
		}
		putHeader(d, &h)
		putNAK(d[headerLen:], tx.session, count, 0)
		_, err := nc.WriteBatch(ms)
		require.NoError(t, err)
		if i%32 == 31 {
			time.Sleep(time.Millisecond) // let the sender's receive queue drain
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for tx.Stats().NAKsReceived < 300 {
		if time.Now().After(deadline) {
			t.Fatalf("the sender heard %d NAKs in 10 s, want 300; stats %+v", tx.Stats().NAKsReceived, tx.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	st := tx.Stats()
	require.Equal(t, uint64(count), st.RepairsMulticast, "repairs of %d datagrams asked for 300 times; stats %+v", count, st)
	require.Equal(t, uint64(299*count), st.RepairsSuppressed)
	require.Equal(t, uint64(count*(headerLen+len(b))), st.RepairBytes, "bytes of %d repairs, each a datagram as sent", count)
}

// A NAK pays for the repairs it causes: an unpadded NAK for the whole
// window, sent 200 times with random echoes, makes the sender resend at
// most nakPays times its bytes; one padded to an MTU gets nakPays
// datagrams of an MTU.
func TestNAKPaysForRepairs(t *testing.T) {
	group := newGroup()
	tx := listenT(t, group, Config{RepairInterval: time.Second, RepairShare: -1})
	nc := rawConn(t, group) // the NAKs' sender
	const count = 64
	b := make([]byte, tx.frag) // one datagram of an MTU each
	for i := range uint64(count) {
		_, err := tx.WriteTo(payload(b, i), group)
		require.NoError(t, err)
	}
	sendsDone(t, tx)
	send := func(d []byte, n int) {
		ms := []rdmanet.Message{{Buffer: d, Addr: tx.local}}
		for i := range n {
			h := header{kind: kindNAK, session: 7, seq: 0, tx: uint16(rand.Uint32())}
			putHeader(d, &h)
			putNAK(d[headerLen:], tx.session, count, 0)
			_, err := nc.WriteBatch(ms)
			require.NoError(t, err)
			if i%32 == 31 {
				time.Sleep(time.Millisecond) // let the sender's receive queue drain
			}
		}
	}
	waitNAKs := func(n uint64) {
		deadline := time.Now().Add(10 * time.Second)
		for tx.Stats().NAKsReceived < n {
			if time.Now().After(deadline) {
				t.Fatalf("the sender heard %d NAKs in 10 s, want %d", tx.Stats().NAKsReceived, n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	short := make([]byte, headerLen+nakPayload)
	send(short, 200)
	waitNAKs(200)
	st := tx.Stats()
	require.LessOrEqual(t, st.RepairBytes, uint64(nakPays*200*len(short)), "repairs for 200 unpadded NAKs; stats %+v", st)
	require.NotZero(t, st.RepairsRateLimited, "what the NAKs did not pay for is counted")

	// A receiver's NAK: padded to what it asks for.
	padded := make([]byte, nakLen(nakPays, tx.mtu))
	before := tx.Stats().RepairsMulticast
	send(padded, 1)
	waitNAKs(201)
	want := uint64(nakPays * len(padded) / (len(b) + headerLen))
	require.Equal(t, uint64(nakPays), want)
	// NAKsReceived counts a NAK before it is answered: wait for the
	// repairs (one NAK: no more can come).
	deadline := time.Now().Add(10 * time.Second)
	for tx.Stats().RepairsMulticast-before < want && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	require.Equal(t, want, tx.Stats().RepairsMulticast-before, "a NAK padded to an MTU (%d B) gets %d datagrams of %d B; stats %+v", len(padded), want, len(b)+headerLen, tx.Stats())
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

// A NAK for a datagram whose last send has not completed is not answered
// yet (the device may still read the slot, whose header a repair
// rewrites): counted as RepairsDeferred; asked again once the send
// completed, it is repaired.
func TestRepairDeferredWhileSendInFlight(t *testing.T) {
	group := newGroup()
	tx := listenT(t, group, Config{MaxMessage: 8 << 10, Window: 64})
	_, err := tx.WriteTo([]byte("m0"), group)
	require.NoError(t, err)
	s := &tx.snd
	s.mu.Lock()
	slot := s.wi.of(0)
	// Not completed: a mark far past SendsPosted, which the heartbeats
	// the conn posts meanwhile (completing at once) do not reach.
	s.posted[slot] = tx.conn.SendsPosted() + 1<<40
	s.mu.Unlock()
	from := rdmanet.Addr{QPN: 0x4253}
	before := tx.Stats()
	inject(tx, nakDG(85, tx.session, 0, 1), from)
	st := tx.Stats()
	require.Equal(t, before.RepairsDeferred+1, st.RepairsDeferred, "stats %+v", st)
	require.Equal(t, before.RepairsMulticast, st.RepairsMulticast, "repaired under the device")
	s.mu.Lock()
	s.posted[slot] = 0
	s.mu.Unlock()
	inject(tx, nakDG(85, tx.session, 0, 1), from)
	st2 := tx.Stats()
	require.Equal(t, st.RepairsMulticast+1, st2.RepairsMulticast, "asked again, completed; stats %+v", st2)
	require.Equal(t, st.RepairsDeferred, st2.RepairsDeferred)
}

// A sender's repair credit starts full at the burst the package doc
// promises, 256 KiB: a spoofed NAK stream makes an idle sender repair at
// most that at once.
func TestRepairBurstIs256KiB(t *testing.T) {
	group := newGroup()
	tx := listenT(t, group, Config{})
	s := &tx.snd
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, float64(256<<10), s.repair.burst)
	require.Equal(t, float64(256<<10), s.repair.credit, "an idle sender's credit")
	require.True(t, s.repair.covers(256<<10, tx.now()))
	require.False(t, s.repair.covers(256<<10+1, tx.now()), "past the burst")
}

// A unicast repair is taken to be on its way for two of the asking
// receiver's round trips (the NAK's rtt; at least RepairLinger, at most
// maxRTO): at a round trip of 3 ms, a NAK 1 or 4 ms after the repair is
// held, one 7 ms after it is answered. A held case whose NAK was handled
// too late to be held (the machine stalled the test past 2 rtt) is tried
// again, at most 20 times.
func TestUnicastRepairLingersTwoRTTs(t *testing.T) {
	group := newGroup()
	tx := listenT(t, group, Config{UnicastRepair: true, RepairLinger: time.Microsecond, RepairShare: -1})
	from := *rawConn(t, group).LocalAddr().(*rdmanet.Addr)
	_, err := tx.WriteTo([]byte("m0"), group)
	require.NoError(t, err)
	const rtt = 3 * time.Millisecond // 2 rtt: 6 ms, under maxRTO
	nak := make([]byte, headerLen+nakPayload)
	putHeader(nak, &header{kind: kindNAK, session: 88, seq: 0})
	putNAK(nak[headerLen:], tx.session, 1, uint32(rtt))
	s := &tx.snd
	for _, tc := range []struct {
		age      time.Duration
		repaired uint64
	}{{time.Millisecond, 0}, {4 * time.Millisecond, 0}, {7 * time.Millisecond, 1}} {
		for try := 1; ; try++ {
			sendsDone(t, tx) // the last repair's send: not deferred
			s.mu.Lock()
			set := tx.now()
			s.repairT[s.wi.of(0)] = set - int64(tc.age) // repaired age ago
			s.mu.Unlock()
			before := tx.Stats()
			inject(tx, nak, from)
			late := time.Duration(tx.now()-set)+tc.age >= 2*rtt
			st := tx.Stats()
			if tc.repaired == 0 && late && try < 20 {
				t.Logf("a NAK %v after the repair was handled past 2 rtt (try %d): again", tc.age, try)
				continue
			}
			require.Equal(t, before.NAKsReceived+1, st.NAKsReceived, "stats %+v", st)
			require.Equal(t, tc.repaired, st.RepairsUnicast-before.RepairsUnicast, "a NAK %v after the repair: got %d repairs, want %d; stats %+v", tc.age, st.RepairsUnicast-before.RepairsUnicast, tc.repaired, st)
			require.Equal(t, 1-tc.repaired, st.RepairsSuppressed-before.RepairsSuppressed, "a NAK %v after the repair: got %d held, want %d", tc.age, st.RepairsSuppressed-before.RepairsSuppressed, 1-tc.repaired)
			break
		}
	}
}

// A NAK's repairs go out together, as many a post as s.msgs holds: for a
// NAK asking len(s.msgs)+1 datagrams the first len(s.msgs) are all staged
// before any is posted, and the last after their one post (the send hook
// reads SendsPosted as each repair is staged). Posted one at a time,
// each would be staged after the post of the one before it.
func TestRepairsPostedTogether(t *testing.T) {
	group := newGroup()
	tx := listenT(t, group, Config{RepairShare: -1})
	from := *rawConn(t, group).LocalAddr().(*rdmanet.Addr)
	fit := len(tx.snd.msgs)
	n := fit + 1
	k, err := tx.WriteBatch(batchT(n, 10)) // one datagram each
	require.NoError(t, err)
	require.Equal(t, n, k)
	sendsDone(t, tx)    // settled: none deferred
	var posted []uint64 // per repair staged: SendsPosted then
	tx.sendHook = func(seq uint64, repair bool, at int64) {
		if repair {
			posted = append(posted, tx.conn.SendsPosted())
		}
	}
	nak := make([]byte, tx.mtu) // pays for nakPays MTUs: every datagram asked for
	putHeader(nak, &header{kind: kindNAK, session: 88, seq: 0})
	putNAK(nak[headerLen:], tx.session, uint32(n), 0)
	before := tx.Stats().RepairsMulticast
	inject(tx, nak, from)
	require.Equal(t, uint64(n), tx.Stats().RepairsMulticast-before, "repairs of the %d datagrams asked for", n)
	require.Len(t, posted, n, "repairs staged")
	for i, p := range posted {
		want := posted[0]
		if i >= fit {
			want += uint64(fit) // after the first post, of fit repairs
		}
		require.Equal(t, want, p, "repair %d of %d staged after %d sends, want %d", i, n, p-posted[0], want-posted[0])
	}
}
