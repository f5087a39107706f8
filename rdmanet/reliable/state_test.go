package reliable

import (
	"encoding/binary"
	"errors"
	"math"
	"net"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// Tests of the receiver's state bounds: windows grown on demand,
// MaxSenders eviction and refusal, MaxMessage on receive, plausibility
// checks and saturating counters. Hostile datagrams come from a plain
// rdmanet conn on the group (rawConn), as any program on the fabric could
// send them.

// rawConn is a plain rdmanet conn on the group: a sender of forged
// datagrams.
func rawConn(t testing.TB, group *net.UDPAddr) *rdmanet.Conn {
	t.Helper()
	raw, err := testListenConfig().ListenMulticast(t.Context(), "rdma", nil, group)
	require.NoError(t, err)
	t.Cleanup(func() { raw.Close() })
	return raw
}

func dataDG(session uint32, seq, msg uint64, frag, nfrag uint16, pl []byte) []byte {
	b := make([]byte, headerLen+len(pl))
	putHeader(b, &header{kind: kindData, session: session, seq: seq, msg: msg, frag: frag, nfrag: nfrag})
	copy(b[headerLen:], pl)
	return b
}

func heartbeatDG(session uint32, seq, msg, lowSeq, lowMsg uint64) []byte {
	b := make([]byte, headerLen+hbPayload)
	putHeader(b, &header{kind: kindHeartbeat, session: session, seq: seq, msg: msg})
	putHeartbeat(b[headerLen:], lowSeq, lowMsg)
	return b
}

func lostDG(session uint32, seq, msg uint64) []byte {
	b := make([]byte, headerLen)
	putHeader(b, &header{kind: kindLost, session: session, seq: seq, msg: msg})
	return b
}

func nakDG(session, target uint32, seq uint64, count uint32) []byte {
	b := make([]byte, headerLen+nakPayload)
	putHeader(b, &header{kind: kindNAK, session: session, seq: seq})
	putNAK(b[headerLen:], target, count, 0)
	return b
}

func statusDG(session, target uint32, seq, limit uint64) []byte {
	b := make([]byte, headerLen+statusPayload)
	putHeader(b, &header{kind: kindStatus, session: session, seq: seq})
	putStatus(b[headerLen:], target, limit)
	return b
}

// send writes forged datagrams to the group and waits until counted(c)
// has grown by one for each: a burst larger than the receive queue would
// be dropped by the backend, which is not what these tests are about.
func send(t testing.TB, raw *rdmanet.Conn, group *net.UDPAddr, c *Conn, counted func(Stats) uint64, dgs ...[]byte) {
	t.Helper()
	want := counted(c.Stats())
	for i, b := range dgs {
		_, err := raw.WriteTo(b, group)
		require.NoError(t, err)
		want++
		if i%16 == 15 || i == len(dgs)-1 {
			deadline := time.Now().Add(10 * time.Second)
			for counted(c.Stats()) < want {
				if time.Now().After(deadline) {
					t.Fatalf("after %d forged datagrams: counted %d, want %d; stats %+v", i+1, counted(c.Stats()), want, c.Stats())
				}
				time.Sleep(100 * time.Microsecond)
			}
		}
	}
}

// inject hands b to c as if received from from (a forged source
// address): only while nobody reads c (the direct-delivery buffer belongs
// to a reader).
func inject(c *Conn, b []byte, from rdmanet.Addr) {
	var h header
	c.handle(b, from, &h, c.now())
}

// sendsDone waits until every send c has posted completed. A NAK for a
// datagram whose send is still in flight is deferred (RepairsDeferred),
// and on rdma-core (rxe above all) a send completes well after the write
// returns: a test that counts repairs or suppressed repairs NAKs only
// settled datagrams.
func sendsDone(t testing.TB, c *Conn) {
	t.Helper()
	require.NoError(t, c.conn.WaitSends(c.conn.SendsPosted()))
}

func readMsg(t testing.TB, c *Conn) ([]byte, *rdmanet.Addr, error) {
	t.Helper()
	buf := make([]byte, 8<<20)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, from, err := c.ReadFrom(buf)
	if from == nil {
		return buf[:n], nil, err
	}
	return buf[:n], from.(*rdmanet.Addr), err
}

func requireLoss(t testing.TB, c *Conn, from net.Addr, messages uint64) {
	t.Helper()
	b, got, err := readMsg(t, c)
	var le *LossError
	require.True(t, errors.As(err, &le), "got %v, want a LossError of %d messages", err, messages)
	require.Empty(t, b, "bytes read with the loss report")
	require.Equal(t, messages, le.Messages)
	require.Equal(t, from.String(), got.String())
}

func heapInuse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// peerBytes returns, for every peer of c, what it costs (peer.bytes).
func peerBytes(c *Conn) map[peerKey]int {
	c.rcv.mu.Lock()
	defer c.rcv.mu.Unlock()
	m := make(map[peerKey]int, len(c.rcv.peers))
	for k, p := range c.rcv.peers {
		m[k] = p.bytes()
	}
	return m
}

// 64 members in one process, each with the one FlowMin Config: every
// member hears every other (FlowMin heartbeats from Listen), but a
// receive window takes memory only once a sender's data must be kept. A
// heard-but-idle sender costs a receiver at most 64 KiB (it was a window
// of RecvWindow datagrams, 4.26 MB at MTU 4096), and the process's heap
// stays under 512 MB while one member writes to the other 63 (before:
// 64 x 63 x 4.26 MB, out of memory). Members are added one at a time and
// the heap checked after each, so that the old code fails early (at
// about 12 members), not by exhausting the machine.
func TestRecvWindowsGrowOnDemand(t *testing.T) {
	members, count := 64, 200
	if testDevice != "" {
		members = 32 // rxe attaches at most 56 QPs to a group (max_mcast_qp_attach)
	}
	const heapLimit, idleLimit = 512 << 20, 64 << 10
	// Status and heartbeats every few hundred ms: 64 x 63 pairs of them
	// at the 1 ms default would be millions of datagrams a second.
	cfg := Config{FlowControl: FlowMin, StatusInterval: 250 * time.Millisecond,
		HeartbeatMax: 250 * time.Millisecond, ReceiverTimeout: time.Minute, SenderTimeout: time.Minute}
	group := newGroup()
	base := heapInuse()
	var ms []*Conn
	for i := range members {
		ms = append(ms, listenT(t, group, cfg))
		if h := heapInuse(); h > base+heapLimit {
			t.Fatalf("%d members: heap %d MB over %d MB before any data", i+1, (h-base)>>20, heapLimit>>20)
		}
	}
	// Everyone hears everyone.
	deadline := time.Now().Add(30 * time.Second)
	for _, c := range ms {
		for c.Stats().Senders < members-1 {
			if time.Now().After(deadline) {
				t.Fatalf("a member hears %d senders, want %d", c.Stats().Senders, members-1)
			}
			if h := heapInuse(); h > base+heapLimit {
				t.Fatalf("heap %d MB over %d MB before any data", (h-base)>>20, heapLimit>>20)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	heard := heapInuse() - base
	maxIdle := 0
	for _, c := range ms {
		for _, b := range peerBytes(c) {
			maxIdle = max(maxIdle, b)
		}
		require.Zero(t, c.Stats().RecvWindowBytes, "a receive window before any data")
	}
	require.LessOrEqual(t, maxIdle, idleLimit, "bytes of a heard-but-idle sender")

	tx := ms[0]
	waitReceivers(t, tx, members-1)
	size := 2*tx.frag + tx.frag/2 // 3 datagrams: kept in the window, not delivered directly
	sendAll(t, tx, group, ms[1:], count, size, 30*time.Second)

	after := heapInuse() - base
	maxIdle, maxWriter, windows := 0, 0, uint64(0)
	for _, c := range ms[1:] {
		for k, b := range peerBytes(c) {
			if k.session == tx.session {
				maxWriter = max(maxWriter, b)
			} else {
				maxIdle = max(maxIdle, b)
			}
		}
		windows += c.Stats().RecvWindowBytes
	}
	t.Logf("%d members, each hearing %d: heap %d KB when all heard (%d B per sender heard), %d KB after %d messages of %d B "+
		"from one; largest idle sender %d B, the writer's window at most %d B at one receiver, %d KB of windows in all",
		members, members-1, heard>>10, heard/uint64(members*(members-1)), after>>10, count, size,
		maxIdle, maxWriter, windows>>10)
	require.LessOrEqual(t, maxIdle, idleLimit, "bytes of a heard-but-idle sender after the writes")
	require.LessOrEqual(t, after, uint64(heapLimit), "heap after the writes")
	require.LessOrEqual(t, maxWriter, int(tx.cfg.RecvWindow*(tx.stride+12))+idleLimit, "the writer's window: at most RecvWindow datagrams")
	require.NotZero(t, maxWriter-maxIdle, "the writer's data was kept in a window somewhere")
}

// A ring grows from nothing by doubling, keeping what it holds at the
// right slots, up to RecvWindow; shrink frees it when empty.
func TestRingGrows(t *testing.T) {
	group := newGroup()
	// MaxMessage 16 KiB: RecvWindow 100 holds two at MTU 1024 too (rxe).
	c := listenT(t, group, Config{RecvWindow: 100, MaxMessage: 16 << 10})
	r := &c.rcv
	r.mu.Lock()
	defer r.mu.Unlock()
	p := &peer{placed: true, next: 1000, contig: 1000, high: 1000, nextMsg: 5, addr: &rdmanet.Addr{}}
	put := func(seq uint64) {
		if seq-p.next >= p.ri.n {
			r.grow(p, seq)
		}
		i := p.ri.of(seq)
		b := dataDG(1, seq, 5, 0, 1, []byte{byte(seq)})
		copy(p.ring[int(i)*c.stride:], b)
		p.lens[i], p.seqs[i] = int32(len(b)), seq
	}
	require.False(t, p.valid(1000), "no ring")
	require.Zero(t, p.ri.n)
	for _, tc := range []struct {
		seq   uint64
		slots uint64
	}{{1000, minRing}, {1003, minRing}, {1008, 16}, {1040, 64}, {1099, 100}} {
		put(tc.seq)
		require.Equal(t, tc.slots, p.ri.n, "slots after seq %d", tc.seq)
		require.Len(t, p.lens, int(tc.slots))
	}
	for seq := uint64(990); seq < 1110; seq++ {
		want := seq == 1000 || seq == 1003 || seq == 1008 || seq == 1040 || seq == 1099
		require.Equal(t, want, p.valid(seq), "seq %d", seq)
		if want {
			require.Equal(t, byte(seq), p.slot(seq, c.stride)[headerLen])
		}
	}
	p.high = 1100
	p.shrink()
	require.NotZero(t, p.ri.n, "not empty: kept")
	p.next = 1100
	p.shrink()
	require.Zero(t, p.ri.n)
	require.Nil(t, p.ring)
	require.False(t, p.valid(1100))
}

// A sender's ring unused for longer than SenderTimeout is freed at the
// sweep, empty, while the sender stays tracked (heard meanwhile): at
// exactly SenderTimeout unused it is kept, as the sender is at exactly
// SenderTimeout unheard, and a nanosecond later freed. The sweeps are
// the test's, an hour ahead on the conn's clock (SenderTimeout an hour):
// the timer loop's own, at the clock's now, sweep nothing meanwhile.
// Seed 126: the sweep's `now-p.keptAt > SenderTimeout` -> `>=` freed it
// at exactly SenderTimeout.
func TestIdleRingFreedAfterSenderTimeout(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{SenderTimeout: time.Hour})
	from := *rawConn(t, group).LocalAddr().(*rdmanet.Addr) // where its status reports go
	const session = 104
	inject(r, dataDG(session, 0, 0, 0, 1, []byte("m0")), from)
	b, _, err := readMsg(t, r)
	require.NoError(t, err)
	require.Equal(t, "m0", string(b))
	ring := minRing * (uint64(r.stride) + 4 + 8)
	require.Equal(t, ring, r.Stats().RecvWindowBytes, "the ring of the one datagram kept")

	rc := &r.rcv
	rc.mu.Lock()
	p := peerOf(t, r, session)
	kept := p.keptAt
	rc.mu.Unlock()
	sweepAt := func(now int64) {
		rc.mu.Lock()
		p.heard = now // heard just now: not timed out
		rc.lastTick = now - rc.sweepGap
		rc.mu.Unlock()
		rc.tick(now)
	}
	at := kept + int64(time.Hour)
	sweepAt(at)
	st := r.Stats()
	require.Equal(t, 1, st.Senders, "the sender, heard")
	require.Equal(t, ring, st.RecvWindowBytes, "the ring unused exactly SenderTimeout: kept")
	sweepAt(at + 1)
	st = r.Stats()
	require.Equal(t, 1, st.Senders, "the sender, heard")
	require.Zero(t, st.RecvWindowBytes, "the ring unused a nanosecond over SenderTimeout: freed")
}

// Stats' RecvWindowBytes is exactly what the senders' rings take: a
// slot is the datagram's stride, its length (int32) and its seq
// (uint64). The rings grow from minRing slots by doubling, so the test
// knows every ring's size; peer.bytes adds the peer's own state.
func TestRecvWindowBytesExact(t *testing.T) {
	r := listenT(t, newGroup(), Config{SenderTimeout: time.Hour})
	from := rdmanet.Addr{QPN: 0x4261}
	slot := uint64(r.stride) + 4 + 8
	state := uint64(unsafe.Sizeof(peer{}) + unsafe.Sizeof(rdmanet.Addr{}))
	require.Zero(t, r.Stats().RecvWindowBytes, "no sender yet")
	for _, tc := range []struct {
		what  string
		dg    []byte
		slots map[uint32]uint64 // each sender's ring, in slots
	}{
		// Message 0 of 3 fragments, its first missing: seq 1 is kept.
		{"a gap at seq 0", dataDG(100, 1, 0, 1, 3, []byte("b")), map[uint32]uint64{100: minRing}},
		{"seq 20: the ring doubles twice", dataDG(100, 20, 5, 0, 1, []byte("m5")), map[uint32]uint64{100: 32}},
		{"a second sender", dataDG(101, 2, 0, 2, 3, []byte("c")), map[uint32]uint64{100: 32, 101: minRing}},
	} {
		inject(r, tc.dg, from)
		st := r.Stats()
		want := uint64(0)
		for _, n := range tc.slots {
			want += n * slot
		}
		require.Equal(t, len(tc.slots), st.Senders, "%s: senders", tc.what)
		require.Equal(t, want, st.RecvWindowBytes, "%s: got %d bytes, want %d", tc.what, st.RecvWindowBytes, want)
		for k, b := range peerBytes(r) {
			want := state + tc.slots[k.session]*slot
			require.Equal(t, want, uint64(b), "%s: sender %d: got %d bytes, want %d", tc.what, k.session, b, want)
		}
	}
}

// MaxSenders tracked, all idle (fake senders, one heartbeat each): a new
// sender is admitted by evicting the least recently heard, and gets
// everything. Before, it was refused for as long as the fakes were
// tracked (SenderTimeout), and lost what it sent meanwhile silently.
func TestMaxSendersEvictsIdle(t *testing.T) {
	const fakes = 8
	group := newGroup()
	r := listenT(t, group, Config{MaxSenders: fakes, SenderTimeout: time.Hour})
	raw := rawConn(t, group)
	var hbs [][]byte
	for i := range fakes {
		hbs = append(hbs, heartbeatDG(uint32(1000+i), 0, 0, 0, 0))
	}
	send(t, raw, group, r, func(s Stats) uint64 { return uint64(s.Senders) }, hbs...)
	// One more fake: evicts the first.
	send(t, raw, group, r, func(s Stats) uint64 { return s.SendersEvicted }, heartbeatDG(2000, 0, 0, 0, 0))
	require.Equal(t, fakes, r.Stats().Senders)

	tx := listenT(t, group, Config{FlowControl: FlowMin})
	waitReceivers(t, tx, 1)
	sendAll(t, tx, group, []*Conn{r}, 500, 100, 10*time.Second)
	st := r.Stats()
	t.Logf("evicted %d, refused %d, senders %d", st.SendersEvicted, st.SendersRefused, st.Senders)
	require.Equal(t, uint64(2), st.SendersEvicted)
	require.Zero(t, st.SendersRefused)
	require.Zero(t, st.LossesReported)

	// The fake evicted first is heard again: it resumes where it was
	// (its next message, 0: no loss), evicting another idle fake.
	send(t, raw, group, r, func(s Stats) uint64 { return s.MessagesReceived + uint64(r.rcv.readyLen()) },
		dataDG(1000, 0, 0, 0, 1, []byte("resumed")))
	b, from, err := readMsg(t, r)
	require.NoError(t, err)
	require.Equal(t, "resumed", string(b))
	require.Equal(t, raw.LocalAddr().String(), from.String())
}

// MaxSenders tracked, none idle (fake senders with a gap each, their NAKs
// never answered): a new sender's datagrams are refused, counted, and its
// first one remembered; once the fakes time out it is admitted there, so
// what it sent meanwhile is repaired from its window or, what left the
// window, reported lost: every message is delivered or reported. Before,
// it started at its first datagram admitted, and what came before was
// lost with no LossError.
func TestMaxSendersRefusedNotSilent(t *testing.T) {
	const fakes, count = 8, 300
	group := newGroup()
	r := listenT(t, group, Config{MaxSenders: fakes, SenderTimeout: 300 * time.Millisecond, StatusInterval: 20 * time.Millisecond})
	raw := rawConn(t, group)
	var dgs [][]byte
	for i := range fakes { // the second fragment of a message: a gap at its first, NAKed
		dgs = append(dgs, dataDG(uint32(1000+i), 1, 0, 1, 2, []byte("fake")))
	}
	send(t, raw, group, r, func(s Stats) uint64 { return uint64(s.Senders) }, dgs...)
	require.Eventually(t, func() bool { return r.Stats().NAKsSent >= fakes }, 10*time.Second, time.Millisecond)

	tx := listenT(t, group, Config{Window: 64, MaxMessage: 8 << 10})
	errc := make(chan error, 1)
	var losses uint64
	go func() {
		var err error
		losses, err = readAll(r, count, 100, 20*time.Second)
		errc <- err
	}()
	writeN(t, tx, group, 0, count, 100)
	require.NoError(t, <-errc, "every message delivered or reported lost, in order; stats %+v", r.Stats())
	st := r.Stats()
	t.Logf("%d messages: %d reported lost, %d delivered; %d datagrams refused, %d fakes timed out, recovered %d",
		count, losses, st.MessagesReceived, st.SendersRefused, st.SendersTimedOut, st.Recovered)
	require.NotZero(t, st.SendersRefused)
	require.Equal(t, uint64(count), losses+st.MessagesReceived)
	require.Equal(t, losses, st.MessagesLost)
}

// A message with more fragments than the receiver's MaxMessage allows is
// not reassembled: its datagrams are dropped and counted (TooLong), the
// reader gets a LossError at its place, no NAK is sent for it, and the
// sender's next message follows. Before, a forged 1000-fragment message
// (past the 64 KiB MaxMessage) was reassembled and delivered whole.
func TestTooLongMessage(t *testing.T) {
	for _, tc := range []struct {
		name  string
		frags func(i int) bool // which of the 1000 fragments are sent
		next  uint64           // the message number after it
	}{
		{"whole", func(int) bool { return true }, 1},
		{"sparse", func(i int) bool { return i == 999 || i == 500 || i == 3 }, 1},
		// Forged over a sender whose messages take a datagram each: the
		// next is numbered 1000, and the 1000 messages it displaced are
		// reported lost, before it.
		{"displacing", func(int) bool { return true }, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const nfrag = 1000
			group := newGroup()
			r := listenT(t, group, Config{RecvWindow: 4096})
			raw := rawConn(t, group)
			var dgs [][]byte
			sent := 0
			for i := range nfrag {
				if tc.frags(i) {
					dgs = append(dgs, dataDG(77, uint64(i), 0, uint16(i), nfrag, make([]byte, 900))) // fits MTU 1024 (rxe)
					sent++
				}
			}
			send(t, raw, group, r, func(s Stats) uint64 { return s.TooLong }, dgs...)
			_, err := raw.WriteTo(dataDG(77, nfrag, tc.next, 0, 1, []byte("after")), group)
			require.NoError(t, err)
			lost := uint64(0)
			for {
				b, _, err := readMsg(t, r)
				var le *LossError
				if errors.As(err, &le) {
					require.NotZero(t, le.Messages)
					lost += le.Messages
					continue
				}
				require.NoError(t, err)
				require.Equal(t, "after", string(b))
				break
			}
			require.Equal(t, tc.next, lost, "messages reported lost before the next")
			st := r.Stats()
			require.Equal(t, uint64(sent), st.TooLong)
			require.Equal(t, tc.next, st.MessagesLost)
			require.Zero(t, st.Implausible)
			require.Zero(t, st.NAKsSent, "NAKs for a message too long")
			require.Zero(t, st.Overruns)
		})
	}
}

// readyLen is how many peers have something to read.
func (r *receiver) readyLen() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rLen
}

// A message number that jumps further than the seq (each message takes a
// datagram at least) is dropped and counted, not read as lost messages;
// so are a heartbeat and a "lost" answer that say so. Before, the
// datagram's jump of 1000 was reported as 999 messages lost.
func TestImplausibleNumbers(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{})
	raw := rawConn(t, group)
	implausible := func(s Stats) uint64 { return s.Implausible }
	got := func(s Stats) uint64 { return s.MessagesReceived + uint64(r.rcv.readyLen()) }
	send(t, raw, group, r, got, dataDG(9, 0, 0, 0, 1, []byte("a")))
	b, _, err := readMsg(t, r)
	require.NoError(t, err)
	require.Equal(t, "a", string(b))
	send(t, raw, group, r, implausible,
		dataDG(9, 1, 1000, 0, 1, []byte("x")), // message 1000 at seq 1
		dataDG(9, 1, 1, 1, 2, []byte("x")),    // a fragment of a message that starts before the next to read
	)
	send(t, raw, group, r, got, dataDG(9, 1, 1, 0, 1, []byte("b")))
	b, _, err = readMsg(t, r)
	require.NoError(t, err)
	require.Equal(t, "b", string(b))
	send(t, raw, group, r, implausible,
		heartbeatDG(9, 10, 500, 2, 2), // 500 messages in 8 datagrams
		heartbeatDG(9, 10, 3, 12, 3),  // window start past the position
	)
	st := r.Stats()
	require.Equal(t, uint64(4), st.Implausible)
	require.Zero(t, st.LossesReported)
	require.Zero(t, st.MessagesLost)
}

// Counts of messages lost saturate rather than wrap: two forged
// senders each announce 2^63 messages gone (plausible: as many
// datagrams), and MessagesLost stays at the largest uint64. Before, it
// wrapped to 0.
func TestLossCountSaturates(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{})
	raw := rawConn(t, group)
	const half = uint64(1) << 63
	for _, session := range []uint32{5, 6} {
		send(t, raw, group, r, func(s Stats) uint64 { return uint64(s.Senders) }, heartbeatDG(session, 0, 0, 0, 0))
		send(t, raw, group, r, func(s Stats) uint64 { return uint64(r.rcv.readyLen()) }, heartbeatDG(session, half+1, half, half, half))
		requireLoss(t, r, raw.LocalAddr(), half)
	}
	st := r.Stats()
	require.Equal(t, uint64(2), st.LossesReported)
	require.Equal(t, uint64(math.MaxUint64), st.MessagesLost)
	require.Zero(t, st.Implausible)
}

// A "lost" answer is taken only from a sender tracked and while a NAK of
// this receiver to it is outstanding; others are counted and ignored. A
// forged one naming the real sender (its address and session) when no
// NAK was sent does not condemn a later gap: the gap is repaired. Before,
// the forged answer moved the window start far ahead, and the next gap
// was reported lost instead of repaired.
func TestUnsolicitedLost(t *testing.T) {
	group := newGroup()
	r := listenDrop(t, group, Config{}, dropFirst(func(seq uint64) bool { return seq == 12 }))
	tx := listenT(t, group, Config{FlowControl: FlowMin})
	raw := rawConn(t, group)
	waitReceivers(t, tx, 1)
	writeN(t, tx, group, 0, 10, 64)
	for i := range uint64(10) {
		require.Equal(t, i, readOne(t, r, 64))
	}
	// Nobody reads r now: a forged source address may be injected.
	inject(r, lostDG(tx.session, 1000, 1000), *tx.LocalAddr().(*rdmanet.Addr))
	send(t, raw, group, r, func(s Stats) uint64 { return s.Unsolicited }, lostDG(12345, 1000, 1000))
	require.Equal(t, uint64(2), r.Stats().Unsolicited)
	writeN(t, tx, group, 10, 20, 64)
	for i := uint64(10); i < 20; i++ {
		require.Equal(t, i, readOne(t, r, 64), "message %d", i)
	}
	st := r.Stats()
	require.Zero(t, st.LossesReported)
	require.NotZero(t, st.Recovered, "the gap at seq 12 repaired")
}

// FuzzReceive feeds random datagrams (seeded with valid data, heartbeat,
// NAK, status and "lost" datagrams) from random sources to a live conn's
// receive path, and reads what becomes ready: it must not panic, track
// more than MaxSenders senders, hold more than their windows' bound, or
// let a counter go back (wrap). An input is a list of datagrams, each
// [source][length][bytes]; a NAK's or status's target session 0 means
// the conn's own (random) session.
func FuzzReceive(f *testing.F) {
	cfg := Config{MaxSenders: 4, RecvWindow: 64, MaxMessage: 16 << 10, SenderTimeout: time.Hour}
	c := listenT(f, newGroup(), cfg)
	group := c.groupArg
	for i := range 5 { // something in the window for NAKs to ask for
		_, err := c.WriteTo(make([]byte, 100*i+1), group)
		require.NoError(f, err)
	}
	rec := func(src byte, dgs ...[]byte) []byte {
		var in []byte
		for _, b := range dgs {
			in = append(in, src, byte(len(b)))
			in = append(in, b...)
		}
		return in
	}
	f.Add(rec(1, dataDG(7, 0, 0, 0, 1, []byte("hello"))))
	f.Add(rec(1, dataDG(7, 3, 1, 1, 2, []byte("b")), dataDG(7, 2, 1, 0, 2, []byte("a")), dataDG(7, 5, 3, 0, 1, nil)))
	f.Add(rec(2, heartbeatDG(8, 10, 4, 6, 2), lostDG(8, 8, 3), dataDG(8, 9, 3, 0, 1, []byte("x"))))
	f.Add(rec(3, dataDG(9, 0, 0, 0, 1000, []byte("long")), dataDG(9, 1000, 1, 0, 1, []byte("after"))))
	f.Add(rec(4, nakDG(10, 0, 0, 5), statusDG(10, 0, 3, 100), nakDG(10, 0, 2, 1<<20)))
	f.Add(rec(5, heartbeatDG(11, 1<<63+1, 1<<63, 1<<63, 1<<63), heartbeatDG(12, 0, 0, 0, 0), heartbeatDG(13, 0, 0, 0, 0),
		heartbeatDG(14, 0, 0, 0, 0), dataDG(15, 1, 0, 1, 2, nil), dataDG(16, 1, 0, 1, 2, nil)))
	base := *c.LocalAddr().(*rdmanet.Addr)
	buf := make([]byte, 1<<16)
	b := make([]byte, 256)
	var last Stats
	windowMax := uint64(cfg.MaxSenders) * uint64(cfg.RecvWindow) * uint64(c.stride+12)
	f.Fuzz(func(t *testing.T, in []byte) {
		for len(in) >= 2 {
			from := base
			if in[0] != 0 {
				from.QPN = base.QPN + 1 + uint32(in[0]%8) // loopback sources only
			}
			n := min(int(in[1]), len(in)-2)
			d := b[:copy(b, in[2:2+n])]
			in = in[2+n:]
			var h header
			if _, err := decode(d, &h); err == nil && (h.kind == kindNAK || h.kind == kindStatus) &&
				d[headerLen] == 0 && d[headerLen+1] == 0 && d[headerLen+2] == 0 && d[headerLen+3] == 0 {
				binary.BigEndian.PutUint32(d[headerLen:], c.session)
			}
			inject(c, d, from)
			for { // read what is ready, as a reader would
				_, _, _, ok := c.rcv.next(buf, 0)
				if !ok {
					break
				}
			}
		}
		st := c.Stats()
		require.LessOrEqual(t, st.Senders, cfg.MaxSenders)
		require.LessOrEqual(t, st.RecvWindowBytes, windowMax)
		c.rcv.mu.Lock()
		require.LessOrEqual(t, len(c.rcv.memos), c.rcv.memoMax)
		for _, p := range c.rcv.peers {
			require.LessOrEqual(t, p.ri.n, uint64(cfg.RecvWindow))
			require.LessOrEqual(t, p.next, p.contig)
		}
		c.rcv.mu.Unlock()
		for _, v := range [][2]uint64{
			{last.MessagesReceived, st.MessagesReceived}, {last.BytesReceived, st.BytesReceived},
			{last.LossesReported, st.LossesReported}, {last.MessagesLost, st.MessagesLost},
			{last.Duplicates, st.Duplicates}, {last.Overruns, st.Overruns}, {last.Malformed, st.Malformed},
			{last.Foreign, st.Foreign}, {last.SendersRefused, st.SendersRefused}, {last.TooLong, st.TooLong},
			{last.Implausible, st.Implausible}, {last.Unsolicited, st.Unsolicited}, {last.NAKsReceived, st.NAKsReceived},
		} {
			require.LessOrEqual(t, v[0], v[1], "a counter went back: before %+v, after %+v", last, st)
		}
		last = st
	})
}

// A sender forgotten after SenderTimeout and heard again resumes where it
// was: what it sent meanwhile is repaired or reported lost. Before, it
// started afresh at the datagram heard, and the messages between were
// skipped with no LossError (seen under load: a receiver of
// TestKernelLoss got message 7692 where it wanted 6792).
func TestSenderTimeoutResumes(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{SenderTimeout: 200 * time.Millisecond, StatusInterval: 5 * time.Millisecond})
	raw := rawConn(t, group)
	got := func(s Stats) uint64 { return s.MessagesReceived + uint64(r.rcv.readyLen()) }
	send(t, raw, group, r, got, dataDG(21, 0, 0, 0, 1, []byte("m0")))
	b, _, err := readMsg(t, r)
	require.NoError(t, err)
	require.Equal(t, "m0", string(b))
	require.Eventually(t, func() bool { return r.Stats().SendersTimedOut == 1 }, 10*time.Second, time.Millisecond)
	naks := r.Stats().NAKsSent
	_, err = raw.WriteTo(dataDG(21, 5, 5, 0, 1, []byte("m5")), group)
	require.NoError(t, err)
	// The gap (messages 1-4) is NAKed; the forger answers that they
	// left its window.
	require.Eventually(t, func() bool { return r.Stats().NAKsSent > naks }, 10*time.Second, time.Millisecond,
		"no NAK for the messages sent while forgotten")
	_, err = raw.WriteTo(lostDG(21, 5, 5), group)
	require.NoError(t, err)
	requireLoss(t, r, raw.LocalAddr(), 4)
	b, _, err = readMsg(t, r)
	require.NoError(t, err)
	require.Equal(t, "m5", string(b))
}
