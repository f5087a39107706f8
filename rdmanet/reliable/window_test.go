package reliable

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// The sender's data and repairs are all posted from its window, which is
// registered memory: the underlying conn counts every one of them in
// SentRegistered, and copies none into its send ring. What it sends from
// Go memory (heartbeats, "lost" answers, NAKs and status) is small and
// posted inline. The window is small (64 datagrams) so that its slots are
// reused many times over, and repairs rewrite headers in place (the
// longest message is 8 KiB, for a window that small).
func TestWindowPostedFromRegisteredMemory(t *testing.T) {
	group := newGroup()
	const count = 3000
	rx := []*Conn{
		listenDrop(t, group, Config{}, dropFirst(func(s uint64) bool { return s%10 == 3 })),
		listenDrop(t, group, Config{}, dropFirst(func(s uint64) bool { return s%7 == 5 })),
	}
	tx := listenT(t, group, Config{FlowControl: FlowMin, Window: 64, MaxMessage: 8 << 10})
	size := tx.frag + tx.frag/2 // 2 fragments each
	waitReceivers(t, tx, 2)
	// Both counts at one moment: the sender's heartbeats and "lost"
	// answers go out under its lock, and the status reports and NAKs
	// its receive side sends (to the receivers, which heartbeat too)
	// under the receiver's.
	snap := func() (Stats, rdmanet.Stats) {
		tx.rcv.mu.Lock()
		defer tx.rcv.mu.Unlock()
		tx.snd.mu.Lock()
		defer tx.snd.mu.Unlock()
		return tx.counters(), tx.Conn().Stats()
	}
	rbefore, before := snap()
	sendAll(t, tx, group, rx, count, size, 10*time.Second)
	st, cs := snap()
	sent := cs.Sent - before.Sent
	reg := cs.SentRegistered - before.SentRegistered
	t.Logf("%s: conn sent %d datagrams, %d from the window (%d data, %d repairs multicast, %d unicast), %d copied; "+
		"window waits %d, repairs deferred %d, suppressed %d",
		tx.Conn().Backend().Name, sent, reg, st.DatagramsSent, st.RepairsMulticast, st.RepairsUnicast,
		cs.SentCopied-before.SentCopied, st.WindowWaits, st.RepairsDeferred, st.RepairsSuppressed)
	require.Equal(t, uint64(2*count), st.DatagramsSent)
	require.NotZero(t, st.RepairsMulticast)
	require.Equal(t, st.DatagramsSent+st.RepairsMulticast+st.RepairsUnicast, reg,
		"every data datagram and repair is posted from the window")
	require.Zero(t, cs.SentCopied-before.SentCopied, "nothing copied into the conn's send ring")
	// The rest is the sender's own control traffic from Go memory.
	ctrl := st.Heartbeats - rbefore.Heartbeats + st.LostSent - rbefore.LostSent +
		st.NAKsSent - rbefore.NAKsSent + st.StatusSent - rbefore.StatusSent
	require.Equal(t, sent-reg, ctrl, "the rest: heartbeats, lost answers, NAKs, status")
	ok, werr := tx.WindowRegistered()
	require.True(t, ok, "window registered: %v", werr)
	for _, r := range rx {
		require.Zero(t, r.Stats().LossesReported)
		require.Zero(t, r.Conn().Stats().SentRegistered, "a receiver sends nothing from a window")
	}
}

// Unicast repairs come from the window too.
func TestWindowUnicastRepairs(t *testing.T) {
	group := newGroup()
	const count = 1000
	rx := []*Conn{listenDrop(t, group, Config{}, dropFirst(func(s uint64) bool { return s%5 == 1 }))}
	tx := listenT(t, group, Config{FlowControl: FlowMin, UnicastRepair: true, Window: 64, MaxMessage: 8 << 10})
	waitReceivers(t, tx, 1)
	before := tx.Conn().Stats()
	sendAll(t, tx, group, rx, count, 100, 10*time.Second)
	st := tx.Stats()
	cs := tx.Conn().Stats()
	require.NotZero(t, st.RepairsUnicast)
	require.Equal(t, st.DatagramsSent+st.RepairsUnicast, cs.SentRegistered-before.SentRegistered)
}

// After Close the window is gone: writes fail with net.ErrClosed, and the
// timer loop and NAKs never touch it (a use after the unmap would crash
// the test binary).
func TestWindowClosed(t *testing.T) {
	group := newGroup()
	tx := listenT(t, group, Config{Linger: -1})
	_, err := tx.WriteTo(make([]byte, 10), group)
	require.NoError(t, err)
	require.NoError(t, tx.Close())
	_, err = tx.WriteTo(make([]byte, 10), group)
	require.Error(t, err)
	hb := tx.Stats().Heartbeats
	tx.snd.mu.Lock()
	tx.snd.heartbeat(false) // after Close: does nothing
	tx.snd.mu.Unlock()
	now := tx.now() + int64(time.Second) // a heartbeat is due
	require.Equal(t, now+int64(tx.cfg.HeartbeatMax), tx.snd.tick(now), "tick after Close only says when to look again")
	require.Equal(t, hb, tx.Stats().Heartbeats)
}

// A window that cannot be registered is Go memory, and the conn still
// works (its sends copied): on rdma-core a QP takes 16 memory regions,
// and the conn's own two and 14 SendBuffers leave none for the window.
func TestWindowUnregistered(t *testing.T) {
	if testDevice == "" {
		t.Skip("the software backend has no limit of memory regions: the VM (make test-rxe) runs this")
	}
	group := newGroup()
	lc := *testListenConfig()
	lc.DisableLoopback = true
	c, err := lc.ListenMulticast(context.Background(), "rdma", nil, group)
	require.NoError(t, err)
	for {
		if _, err := c.NewSendBuffer(4096); err != nil {
			break
		}
	}
	tx, err := New(c, group, Config{})
	require.NoError(t, err)
	defer tx.Close()
	ok, werr := tx.WindowRegistered()
	require.False(t, ok)
	require.Error(t, werr)
	t.Logf("window not registered: %v", werr)
	rx := listenT(t, group, Config{})
	time.Sleep(20 * time.Millisecond)
	sendAll(t, tx, group, []*Conn{rx}, 200, 100, 5*time.Second)
	require.Zero(t, c.Stats().SentRegistered)
}

// A window slot whose last send has not completed is waited for, and
// the wait counted (WindowWaits). The software backend completes each
// send as it is posted, so no write here ever waits; the test gives slot
// 0 the mark of a send not completed (past SendsPosted, so that
// WaitSends answers at once, with an error): reuse counts the wait and
// returns WaitSends' error rather than the slot.
func TestWindowWaitCounted(t *testing.T) {
	group := newGroup()
	tx := listenT(t, group, Config{MaxMessage: 8 << 10, Window: 64})
	_, err := tx.WriteTo([]byte("m0"), group)
	require.NoError(t, err)
	s := &tx.snd
	s.mu.Lock()
	defer s.mu.Unlock()
	before := tx.Stats().WindowWaits
	require.NoError(t, s.reuse(0), "a slot whose send completed")
	require.Equal(t, before, tx.Stats().WindowWaits, "no wait")
	s.posted[0] = tx.conn.SendsPosted() + 1<<40 // past what heartbeats meanwhile post
	require.Error(t, s.reuse(0), "a send not completed, and WaitSends failing")
	require.Equal(t, before+1, tx.Stats().WindowWaits)
}

// A write whose next window slot cannot be waited for (WaitSends fails)
// returns that error and sends nothing of its message; once the slot is
// free the next write goes out as the next message.
func TestWriteReturnsSlotWaitError(t *testing.T) {
	group := newGroup()
	tx := listenT(t, group, Config{MaxMessage: 8 << 10, Window: 64})
	if tx.conn.Backend().Name != rdmanet.BackendSoftware {
		// A mark past SendsPosted fails WaitSends at once only there;
		// rdma-core waits on its completion channel.
		t.Skip("the failing slot wait is the software backend's")
	}
	_, err := tx.WriteTo([]byte("m0"), group)
	require.NoError(t, err)
	s := &tx.snd
	s.mu.Lock()
	slot := int(s.wi.of(s.next))
	next := s.next
	// A send not completed, and WaitSends failing: far past SendsPosted,
	// which a heartbeat sent before the write below would otherwise
	// reach (the write then found the slot free: seen under load).
	s.posted[slot] = tx.conn.SendsPosted() + 1<<40
	s.mu.Unlock()
	before := tx.Stats()
	n, err := tx.WriteTo([]byte("m1"), group)
	require.Error(t, err, "the slot's wait failed")
	require.Zero(t, n)
	st := tx.Stats()
	require.Equal(t, before.MessagesSent, st.MessagesSent, "stats %+v", st)
	require.Equal(t, before.DatagramsSent, st.DatagramsSent)
	require.Equal(t, before.WindowWaits+1, st.WindowWaits)
	s.mu.Lock()
	require.Equal(t, next, s.next, "the window moved")
	s.posted[slot] = 0
	s.mu.Unlock()
	_, err = tx.WriteTo([]byte("m1"), group)
	require.NoError(t, err)
	require.Equal(t, before.MessagesSent+1, tx.Stats().MessagesSent)
}

// A write that finds the sender stopped (Close got there between the
// write's own check and its turn) sends nothing: 0 messages, ErrClosed.
func TestWriteAfterStopSendsNothing(t *testing.T) {
	group := newGroup()
	tx := listenT(t, group, Config{})
	tx.snd.stop()
	n, err := tx.snd.write([]rdmanet.Message{{Buffer: []byte("late")}})
	require.ErrorIs(t, err, net.ErrClosed)
	require.Zero(t, n)
	require.Zero(t, tx.Stats().MessagesSent)
}

// Each post marks the slots it sent with the conn's count of sends
// posted then (sent), for reuse and repairs to wait on: a write's slots
// get a mark past what was posted before it, and a repair of one a later
// mark.
func TestPostsMarkTheirSlots(t *testing.T) {
	group := newGroup()
	tx := listenT(t, group, Config{MaxMessage: 8 << 10, Window: 64})
	s := &tx.snd
	mark := func(seq uint64) uint64 {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.posted[s.wi.of(seq)]
	}
	base := tx.conn.SendsPosted()
	k, err := tx.WriteBatch(batchT(3, 10))
	require.NoError(t, err)
	require.Equal(t, 3, k)
	after := tx.conn.SendsPosted()
	for seq := range uint64(3) {
		m := mark(seq)
		require.True(t, m >= base+3 && m <= after, "seq %d: got mark %d, want in [%d, %d]", seq, m, base+3, after)
	}
	first := mark(0)
	sendsDone(t, tx) // not deferred (RepairsDeferred)
	before := tx.Stats().RepairsMulticast
	inject(tx, nakDG(89, tx.session, 0, 1), rdmanet.Addr{QPN: 0x4268})
	require.Equal(t, before+1, tx.Stats().RepairsMulticast, "stats %+v", tx.Stats())
	m := mark(0)
	require.True(t, m > first && m <= tx.conn.SendsPosted(), "the repaired slot: got mark %d, want past %d, at most %d", m, first, tx.conn.SendsPosted())
}
