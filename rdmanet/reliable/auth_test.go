//go:build linux

package reliable

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/go-rdma/rdmanet/rdmanet"
	"github.com/stretchr/testify/require"
)

var testKey = []byte("rdmanet reliable test group key!") // 32 bytes

// The anti-replay window accepts each counter once, in any order within
// the window, and refuses counters older than the window.
func TestReplayWindow(t *testing.T) {
	var w replayWindow
	steps := []struct {
		ctr  uint64
		want bool
	}{
		{0, false}, {1, true}, {1, false}, {3, true}, {2, true}, {2, false}, {3, false},
		{100, true}, {64, true}, {65, true}, {64, false},
		{100 + replayWindowLen, true}, {100, false}, // 100 seen, at the window's edge
		{101, true}, {99, false}, // 99: too old to tell
		{1 << 40, true}, {1<<40 - replayWindowLen, true}, {1<<40 - replayWindowLen - 1, false},
		{1<<40 - 1, true}, {1<<40 - 1, false}, {1<<40 + 64*replayWords + 5, true}, {1 << 40, false},
	}
	for i, s := range steps {
		require.Equal(t, s.want, w.accept(s.ctr), "step %d: accept(%d)", i, s.ctr)
	}
	// Every counter of a long run in reverse order inside the window.
	var v replayWindow
	for c := uint64(replayWindowLen + 1); c >= 1; c-- {
		require.True(t, v.accept(c), "accept(%d) in reverse", c)
	}
	for c := uint64(1); c <= replayWindowLen+1; c++ {
		require.False(t, v.accept(c), "accept(%d) again", c)
	}
	// Counters in order, the highest moving on one at a time across many
	// words: every counter seen inside the window stays refused (the
	// words cleared as the highest moves are only those past its old one).
	var u replayWindow
	const top = 5000
	for c := uint64(1); c <= top; c++ {
		require.True(t, u.accept(c), "accept(%d) in order", c)
	}
	for c := uint64(top - replayWindowLen); c <= top; c++ {
		require.False(t, u.accept(c), "accept(%d) again, the highest %d", c, top)
	}
}

// Config.Key, RepairInterval and RepairShare are checked, naming the field.
func TestGuardConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Key: make([]byte, 15)}, "reliable: Config.Key is 15 bytes, want 16 to 64 (or none)"},
		{Config{Key: make([]byte, 65)}, "reliable: Config.Key is 65 bytes, want 16 to 64 (or none)"},
		{Config{Key: make([]byte, 16)}, ""},
		{Config{Key: make([]byte, 64)}, ""},
		{Config{RepairInterval: -1}, "reliable: Config.RepairInterval -1ns is negative"},
		{Config{RepairInterval: 2 * time.Second}, "reliable: Config.RepairInterval 2s is over the limit 1s"},
		{Config{RepairShare: math.NaN()}, "reliable: Config.RepairShare NaN is not a finite number"},
		{Config{RepairShare: math.Inf(1)}, "reliable: Config.RepairShare +Inf is not a finite number"},
		{Config{RepairShare: math.Inf(-1)}, "reliable: Config.RepairShare -Inf is not a finite number"}, // negative, yet no share
		{Config{RepairShare: 101}, "reliable: Config.RepairShare 101 is over the limit 100"},
		{Config{RepairShare: 100.5}, "reliable: Config.RepairShare 100.5 is over the limit 100"},
		{Config{RepairShare: 100}, ""}, // the limit itself is accepted
		{Config{RepairShare: -1}, ""},
	} {
		err := tc.cfg.guardDefaults()
		if tc.want == "" {
			require.NoError(t, err)
			continue
		}
		require.ErrorContains(t, err, tc.want)
	}
	c := Config{}
	require.NoError(t, c.guardDefaults())
	require.Equal(t, 250*time.Microsecond, c.RepairInterval)
	require.Equal(t, 0.5, c.RepairShare)
	// New refuses a bad key before it allocates anything.
	_, err := Listen(context.Background(), testListenConfig(), "rdma", nil, newGroup(), Config{Key: []byte("short")})
	require.ErrorContains(t, err, "Config.Key is 5 bytes")
}

// A keyed group delivers as an open one (fragmented messages, repairs of
// lost datagrams), with MTU()-52 bytes of a message a datagram; a conn
// without the key, or with another, hears none of it and moves no state:
// no sender tracked, nothing delivered, no NAK or status sent.
func TestKeyed(t *testing.T) {
	for _, unicast := range []bool{false, true} {
		t.Run(fmt.Sprintf("UnicastRepair=%v", unicast), func(t *testing.T) { testKeyed(t, unicast) })
	}
}

func testKeyed(t *testing.T, unicast bool) {
	group := newGroup()
	cfg := Config{Key: testKey, FlowControl: FlowMin, UnicastRepair: unicast}
	rx := listenDrop(t, group, cfg, dropFirst(func(s uint64) bool { return s%17 == 3 }))
	open := listenT(t, group, Config{})
	other := listenT(t, group, Config{Key: []byte("another group's key, 32 bytes..")})
	tx := listenT(t, group, cfg)
	require.Equal(t, tx.conn.MTU()-headerLen-trailerLen, tx.frag)
	waitReceivers(t, tx, 1)
	const count = 500
	sendAll(t, tx, group, []*Conn{rx}, count, 3*tx.frag/2, 10*time.Second)
	rs, ts := rx.Stats(), tx.Stats()
	t.Logf("receiver: %+v", rs)
	require.Equal(t, uint64(count), rs.MessagesReceived)
	require.NotZero(t, rs.Recovered, "repairs of the dropped datagrams")
	t.Logf("sender: %+v", ts)
	// What the keyed conns dropped came from the other two (their
	// heartbeats, NAKs and status): they are closed first, so that
	// nothing more comes.
	var fromOthers uint64
	for _, c := range []*Conn{open, other} {
		c.Close()
		st := c.Stats()
		fromOthers += st.Heartbeats + st.NAKsSent + st.StatusSent
	}
	rs, ts = rx.Stats(), tx.Stats()
	require.Zero(t, rs.Replayed+rs.Malformed+ts.Replayed+ts.Malformed)
	require.LessOrEqual(t, rs.Unauthenticated, fromOthers, "dropped as unauthenticated by the receiver")
	require.LessOrEqual(t, ts.Unauthenticated, fromOthers, "dropped as unauthenticated by the sender")
	for name, c := range map[string]*Conn{"unkeyed": open, "other key": other} {
		st := c.Stats()
		t.Logf("%s: %+v", name, st)
		require.Zero(t, st.MessagesReceived, name)
		require.Zero(t, st.NAKsSent+st.StatusSent, name)
		require.Zero(t, peers(c), name)
		if c == other {
			require.NotZero(t, st.Unauthenticated, name)
		} else {
			require.NotZero(t, st.Malformed, name) // flagKeyed is no flag it knows
		}
	}
	require.Equal(t, 1, tx.Receivers(), "the sender knows only the keyed receiver")
}

// peers is how many senders c tracks.
func peers(c *Conn) int {
	c.rcv.mu.Lock()
	defer c.rcv.mu.Unlock()
	return len(c.rcv.peers)
}

// sealDG returns datagram b with a keyed trailer: transmit counter ctr,
// tagged under key as sent by QP qpn (what seal writes).
func sealDG(key, b []byte, ctr uint64, qpn uint32) []byte {
	var s sealer
	s.init(key)
	n := len(b)
	out := make([]byte, n+trailerLen)
	copy(out, b)
	setKeyed(out, true)
	binary.BigEndian.PutUint64(out[n:], ctr)
	copy(out[n+ctrLen:], s.tag(out[:n+ctrLen], qpn))
	return out
}

// A keyed conn keeps at most limit replay windows; a datagram from one
// source more, while every window was heard within expire, is dropped
// and counted as Foreign (and makes no window). The datagrams are
// authentic but malformed once opened (a fragment index past its
// count), so each one that passes the window is counted as Malformed
// and moves no other state.
func TestKeyedForeignWhenReplayWindowsFull(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{Key: testKey, MaxSenders: 1})
	limit := r.auth.limit
	require.Equal(t, 4*1+64, limit)
	bad := dataDG(93, 0, 0, 1, 1, nil) // frag 1 of 1: malformed
	from := func(i int) rdmanet.Addr { return rdmanet.Addr{QPN: 0x5000 + uint32(i)} }
	before := r.Stats()
	for i := range limit {
		inject(r, sealDG(testKey, bad, 1, from(i).QPN), from(i))
	}
	st := r.Stats()
	require.Equal(t, before.Malformed+uint64(limit), st.Malformed, "stats %+v", st)
	require.Equal(t, before.Foreign, st.Foreign, "a window for each of the first %d sources; stats %+v", limit, st)
	require.Len(t, r.auth.windows, limit)

	inject(r, sealDG(testKey, bad, 1, from(limit).QPN), from(limit))
	st2 := r.Stats()
	require.Equal(t, st.Foreign+1, st2.Foreign, "one source past the limit: Foreign; stats %+v", st2)
	require.Equal(t, st.Malformed, st2.Malformed, "not opened")
	require.Equal(t, st.Unauthenticated+st.Replayed, st2.Unauthenticated+st2.Replayed)
	require.Len(t, r.auth.windows, limit)
	// A known source still gets through.
	inject(r, sealDG(testKey, bad, 2, from(0).QPN), from(0))
	require.Equal(t, st2.Malformed+1, r.Stats().Malformed)
}

// The replay window spans 1984 counters below the highest accepted
// (31 words of 64: doc.go and auth.go promise far more reordering
// room than the paths make): exactly that far below is accepted, one
// more is refused, whatever the constant says.
func TestReplayWindowIs1984(t *testing.T) {
	const top, span = 5000, 1984
	var w replayWindow
	require.True(t, w.accept(top))
	require.True(t, w.accept(top-span), "a counter %d below the highest", span)
	require.False(t, w.accept(top-span), "again")
	require.False(t, w.accept(top-span-1), "a counter %d below the highest", span+1)
	// Every counter in between, in any order, once.
	for c := uint64(top - 1); c > top-span; c -= 7 {
		require.True(t, w.accept(c), "accept(%d)", c)
		require.False(t, w.accept(c), "accept(%d) again", c)
	}
	// The window moves with the highest: top+64 leaves top-span+63 too old.
	require.True(t, w.accept(top+64))
	require.False(t, w.accept(top+64-span-1))
	require.True(t, w.accept(top+64-span))
}

// A keyed datagram as the package documentation gives it, in literals:
// flag 0x8 in byte 1 and a 24-byte trailer after the payload, an 8-byte
// transmit counter and the first 16 bytes of HMAC-SHA-256 under the key
// over the header, the payload, the counter and the sender's QP number
// (4 bytes, big-endian); a message gets MTU()-52 bytes a datagram.
// Sender and receiver share the constants, so a change to them alone
// passes every test that only sends and receives.
func TestKeyedDatagramLayout(t *testing.T) {
	group := newGroup()
	tx := listenT(t, group, Config{Key: testKey})
	require.Equal(t, tx.conn.MTU()-52, tx.frag, "message bytes a keyed datagram")
	lc := testListenConfig()
	lc.DisableLoopback = true
	tap, err := lc.ListenMulticast(context.Background(), "rdma", nil, group)
	require.NoError(t, err)
	defer tap.Close()
	msg := []byte("hello, keyed group")
	_, err = tx.WriteTo(msg, group)
	require.NoError(t, err)
	buf := make([]byte, tap.MTU())
	var d []byte
	for d == nil {
		tap.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, from, err := tap.ReadFromAddr(buf)
		require.NoError(t, err)
		if from.QPN == tx.local.QPN && n > 0 && buf[0]&0x0f == byte(kindData) {
			d = buf[:n]
		}
	}
	require.Len(t, d, 28+len(msg)+24, "header, payload, trailer")
	require.NotZero(t, d[1]&0x8, "flag 0x8")
	require.Equal(t, msg, d[28:28+len(msg)])
	ctr := d[28+len(msg) : 28+len(msg)+8]
	require.NotZero(t, binary.BigEndian.Uint64(ctr), "the transmit counter (from 1)")
	mac := hmac.New(sha256.New, testKey)
	mac.Write(d[:28+len(msg)+8])
	var qpn [4]byte
	binary.BigEndian.PutUint32(qpn[:], tx.local.QPN)
	mac.Write(qpn[:])
	require.Equal(t, mac.Sum(nil)[:16], d[28+len(msg)+8:], "the tag")
}

// A keyed conn's transmit counter is one more for each datagram it sends
// (doc.go), so the replay window's 1984 counters are 1984 datagrams of
// reordering: the three datagrams of one write (sealed one after the
// other under the sender's lock, nothing else sealed between them: the
// conn hears no sender) carry consecutive counters.
func TestKeyedCounterOneADatagram(t *testing.T) {
	group := newGroup()
	tx := listenT(t, group, Config{Key: testKey})
	lc := testListenConfig()
	lc.DisableLoopback = true
	tap, err := lc.ListenMulticast(context.Background(), "rdma", nil, group)
	require.NoError(t, err)
	defer tap.Close()
	const n = 3
	k, err := tx.WriteBatch(batchT(n, 10)) // one datagram each, seqs 0 to 2
	require.NoError(t, err)
	require.Equal(t, n, k)
	ctrs := map[uint64]uint64{} // seq: counter
	buf := make([]byte, tap.MTU())
	for len(ctrs) < n {
		tap.SetReadDeadline(time.Now().Add(10 * time.Second))
		m, from, err := tap.ReadFromAddr(buf)
		require.NoError(t, err, "reading the write's datagrams; seqs seen: %v", ctrs)
		if from.QPN != tx.local.QPN || m != headerLen+10+trailerLen || buf[0]&0x0f != byte(kindData) {
			continue
		}
		if seq := binary.BigEndian.Uint64(buf[12:]); ctrs[seq] == 0 { // its first transmission
			ctrs[seq] = binary.BigEndian.Uint64(buf[headerLen+10:])
		}
	}
	for seq := uint64(1); seq < n; seq++ {
		require.Equal(t, ctrs[0]+seq, ctrs[seq], "the counter of seq %d (seq 0's %d)", seq, ctrs[0])
	}
}

// A sweep (made when the replay windows are all taken) forgets the
// windows not heard for expire and keeps the rest, one heard exactly
// expire ago included: a recent source's replays stay refused.
func TestReplayWindowSweepKeepsTheRecent(t *testing.T) {
	const now, expire = int64(10 << 30), int64(4 << 30) // a conn running for seconds
	a := &authState{windows: map[replayKey]*replayWindow{}, expire: expire}
	for qpn, heard := range map[uint32]int64{1: now - expire - 1, 2: now - expire, 3: now - 1, 4: now} {
		a.windows[replayKey{qpn: qpn}] = &replayWindow{heard: heard}
	}
	a.sweep(now)
	var left []uint32
	for k := range a.windows {
		left = append(left, k.qpn)
	}
	slices.Sort(left)
	require.Equal(t, []uint32{2, 3, 4}, left)
}

// A keyed conn drops, and counts as Unauthenticated, a datagram with no
// trailer (an unkeyed conn's, or one too short to hold a trailer) as
// much as one whose tag is wrong; an authentic one it takes. Seed 111:
// open's first count `unauthenticated.Add(1)` -> `Add(0)` was caught
// only by TestHostile (TestKeyed bounds the count from above).
func TestKeyedCountsMissingTrailer(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{Key: testKey, SenderTimeout: time.Hour})
	from := rdmanet.Addr{QPN: 0x4253}
	dg := dataDG(89, 0, 0, 0, 1, []byte("m0"))
	short := make([]byte, headerLen+trailerLen-1)
	copy(short, dg)
	setKeyed(short, true)
	for i, c := range []struct {
		name string
		b    []byte
	}{
		{"unkeyed", dg},
		{"keyed flag, too short for a trailer", short},
		{"another key's tag", sealDG([]byte("another group's key, 32 bytes.."), dg, 1, from.QPN)},
	} {
		inject(r, c.b, from)
		st := r.Stats()
		require.Equal(t, uint64(i+1), st.Unauthenticated, "%s; stats %+v", c.name, st)
		require.Zero(t, st.Malformed+st.Replayed, c.name)
		require.Zero(t, peers(r), c.name)
	}
	inject(r, sealDG(testKey, dg, 1, from.QPN), from)
	st := r.Stats()
	require.Equal(t, uint64(3), st.Unauthenticated, "authentic; stats %+v", st)
	require.Equal(t, 1, peers(r), "authentic: its sender tracked")
}
