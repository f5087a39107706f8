//go:build linux

package soft_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/infiniband"
	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/internal/verbs/soft"
)

func TestMulticastTwoReceivers(t *testing.T) {
	a := newEndpoint(t, verbs.QPConfig{})
	b := newEndpoint(t, verbs.QPConfig{})
	c := newEndpoint(t, verbs.QPConfig{})
	s := newEndpoint(t, verbs.QPConfig{})
	for _, e := range []*endpoint{a, b, c} {
		e.postRecvs(0, 8)
	}
	a.join("239.201.2.3", false)
	b.join("239.201.2.3", false)
	c.join("239.201.2.4", false)
	m, ah := s.join("239.201.2.3", true)
	assert.True(t, m.SendOnly)
	assert.Equal(t, verbs.MulticastQPN, m.RemoteQPN)
	assert.Equal(t, "::ffff:239.201.2.3", m.MGID.String())

	msg := []byte("hello, group")
	s.send(ah, m.RemoteQPN, msg, 0, 0)
	for _, e := range []*endpoint{a, b} {
		wcs := e.recv(1, 2*time.Second)
		require.Len(t, wcs, 1)
		wc := wcs[0]
		assert.Equal(t, verbs.WCSuccess, wc.Status)
		assert.Equal(t, verbs.WCRecv, wc.Opcode)
		assert.Equal(t, verbs.WCGRH, wc.Flags)
		assert.Equal(t, uint32(verbs.GRHSize+len(msg)), wc.ByteLen)
		assert.Equal(t, s.qp.QPN(), wc.SrcQP)
		assert.Equal(t, e.qp.QPN(), wc.QPN)
		assert.Equal(t, msg, e.buf(wc)[verbs.GRHSize:])
	}
	assert.Empty(t, c.recv(1, 50*time.Millisecond), "QP on another group got a message")
}

func TestLeaveAndSendOnly(t *testing.T) {
	a := newEndpoint(t, verbs.QPConfig{})
	s := newEndpoint(t, verbs.QPConfig{})
	a.postRecvs(0, 8)
	s.postRecvs(0, 8)
	m, _ := a.join("239.201.3.1", false)
	sm, ah := s.join("239.201.3.1", true)
	s.send(ah, sm.RemoteQPN, []byte("one"), 0, 0)
	require.Len(t, a.recv(1, 2*time.Second), 1)
	assert.Empty(t, s.recv(1, 50*time.Millisecond), "send-only member received")

	require.NoError(t, a.id.Leave(m.MGID))
	s.send(ah, sm.RemoteQPN, []byte("two"), 0, 0)
	assert.Empty(t, a.recv(1, 100*time.Millisecond), "received after Leave")
	assert.Error(t, a.id.Leave(m.MGID), "second Leave")
	// Rejoin: delivery resumes.
	a.join("239.201.3.1", false)
	s.send(ah, sm.RemoteQPN, []byte("three"), 0, 0)
	wcs := a.recv(1, 2*time.Second)
	require.Len(t, wcs, 1)
	assert.Equal(t, []byte("three"), a.buf(wcs[0])[verbs.GRHSize:])
}

func TestUnicastAndGRH(t *testing.T) {
	a := newEndpoint(t, verbs.QPConfig{})
	b := newEndpoint(t, verbs.QPConfig{})
	c := newEndpoint(t, verbs.QPConfig{})
	b.postRecvs(0, 8)
	c.postRecvs(0, 8)

	// The QP's identity on lo is 127.q2.q1.q0.
	q := b.qp.QPN()
	wantIP := net.IPv4(127, byte(q>>16), byte(q>>8), byte(q)).To4()
	assert.Equal(t, wantIP, b.id.Local().IP.To4())
	assert.Equal(t, infiniband.GIDFromNetIP(wantIP), b.id.Local().GID)

	ah, err := a.qp.CreateAH(verbs.AHAttr{DGID: b.id.Local().GID, IsGlobal: true, HopLimit: 64})
	require.NoError(t, err)
	msg := []byte("unicast with immediate, 29 b")
	a.send(ah, b.qp.QPN(), msg, verbs.SendWithImm|verbs.SendSolicited, 0xDEADBEEF)
	wcs := b.recv(1, 2*time.Second)
	require.Len(t, wcs, 1)
	wc := wcs[0]
	assert.Equal(t, verbs.WCGRH|verbs.WCWithImm, wc.Flags)
	assert.Equal(t, uint32(0xDEADBEEF), wc.Imm)
	assert.Equal(t, a.qp.QPN(), wc.SrcQP)
	buf := b.buf(wc)
	assert.Equal(t, msg, buf[verbs.GRHSize:])

	// GRH area: bytes 0-19 zero, 20-39 a valid IPv4 header from a to b.
	grh := buf[:verbs.GRHSize]
	assert.Equal(t, make([]byte, 20), grh[:20])
	ip := grh[20:]
	assert.Equal(t, byte(0x45), ip[0])
	assert.Equal(t, uint16(20+8+12+8+4+len(msg)+(-len(msg)&3)+4), binary.BigEndian.Uint16(ip[2:]))
	assert.Equal(t, uint16(0x4000), binary.BigEndian.Uint16(ip[6:]), "DF set, ID 0 from a DF unconnected socket")
	assert.Equal(t, uint16(0), binary.BigEndian.Uint16(ip[4:]))
	assert.Equal(t, byte(17), ip[9])
	assert.NotZero(t, ip[8], "TTL")
	assert.Equal(t, a.id.Local().IP.To4(), net.IP(ip[12:16]))
	assert.Equal(t, wantIP, net.IP(ip[16:20]))
	assertIPv4Checksum(t, ip)

	assert.Empty(t, c.recv(1, 50*time.Millisecond), "unicast reached another QP")

	// To the right address but another QPN: dropped, not for us.
	a.send(ah, b.qp.QPN()^1, msg, 0, 0)
	assert.Empty(t, b.recv(1, 50*time.Millisecond))
	assert.Equal(t, uint64(1), b.qp.Drops().NotForUs)
}

func TestSelfLoopback(t *testing.T) {
	for _, block := range []bool{false, true} {
		a := newEndpoint(t, verbs.QPConfig{BlockSelfMulticastLoopback: block})
		b := newEndpoint(t, verbs.QPConfig{})
		a.postRecvs(0, 8)
		b.postRecvs(0, 8)
		assert.Equal(t, block, a.qp.LoopbackBlocked())
		m, ah := a.join("239.201.4.1", false)
		b.join("239.201.4.1", false)
		a.send(ah, m.RemoteQPN, []byte("loop"), 0, 0)
		require.Len(t, b.recv(1, 2*time.Second), 1)
		if block {
			assert.Empty(t, a.recv(1, 50*time.Millisecond))
			// The self filter dropped it in the kernel (selffilter.go).
			assert.Equal(t, soft.Drops{}, a.drops())
		} else {
			wcs := a.recv(1, 2*time.Second)
			require.Len(t, wcs, 1)
			assert.Equal(t, a.qp.QPN(), wcs[0].SrcQP)
		}
	}
}

func TestMessageSizeAndBadSGE(t *testing.T) {
	a := newEndpoint(t, verbs.QPConfig{})
	m, ah := a.join("239.201.5.1", true)
	require.Equal(t, 4096, m.MTU)
	wr := func(n int) verbs.SendWR {
		return verbs.SendWR{SGE: a.sendSGE(0, n), AH: ah, RemoteQPN: m.RemoteQPN, RemoteQKey: m.QKey}
	}
	n, err := a.qp.PostSend([]verbs.SendWR{wr(4096), wr(4097), wr(1)})
	assert.Equal(t, 1, n)
	assert.ErrorIs(t, err, verbs.ErrMessageSize)

	bad := wr(10)
	bad.SGE.LKey = 999999
	n, err = a.qp.PostSend([]verbs.SendWR{bad})
	assert.Equal(t, 0, n)
	assert.Error(t, err)
	bad = wr(10)
	bad.SGE.Offset = uint32(a.arena.Len() - 5)
	n, err = a.qp.PostSend([]verbs.SendWR{bad})
	assert.Equal(t, 0, n)
	assert.Error(t, err)
	// An SGE that ends at the MR's last byte is inside it; one byte
	// further is not.
	last := wr(10)
	last.SGE.Offset = uint32(a.arena.Len() - 10)
	n, err = a.qp.PostSend([]verbs.SendWR{last})
	assert.Equal(t, 1, n)
	assert.NoError(t, err, "SGE ending at the MR's end")
	last.SGE.Offset++
	n, err = a.qp.PostSend([]verbs.SendWR{last})
	assert.Equal(t, 0, n)
	assert.Error(t, err, "SGE ending one byte past the MR")
	n, err = a.qp.PostRecv([]verbs.RecvWR{{SGE: verbs.SGE{Offset: uint32(a.arena.Len() - bufSize), Length: bufSize, LKey: a.mr.LKey()}}})
	assert.Equal(t, 1, n)
	assert.NoError(t, err, "receive SGE ending at the MR's end")
	n, err = a.qp.PostRecv([]verbs.RecvWR{{SGE: verbs.SGE{Offset: 0, Length: 39, LKey: a.mr.LKey()}}})
	assert.Equal(t, 0, n)
	assert.Error(t, err, "receive buffer shorter than the GRH")
}

// TestInlineFromCallerBuffer posts inline sends from Go memory no MR
// covers (SGE unregistered): a batch long enough to go as one GSO run,
// a lone one and an empty one. Each is read before PostSend returns, so
// the buffers are overwritten at once and the receiver still gets what
// was posted. Without SendInline, Inline is ignored and the SGE is sent.
func TestInlineFromCallerBuffer(t *testing.T) {
	a, b := newEndpoint(t, verbs.QPConfig{}), newEndpoint(t, verbs.QPConfig{})
	b.postRecvs(0, 8)
	ah, err := a.qp.CreateAH(verbs.AHAttr{DGID: b.id.Local().GID, IsGlobal: true, HopLimit: 64})
	require.NoError(t, err)
	var want [][]byte
	post := func(bufs [][]byte, flags verbs.SendFlags) {
		wrs := make([]verbs.SendWR, len(bufs))
		for i, p := range bufs {
			wrs[i] = verbs.SendWR{WRID: uint64(i), Inline: p, SGE: verbs.SGE{LKey: 12345, Length: uint32(len(p))},
				AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: b.qp.QKey(), Flags: flags}
			if flags&verbs.SendInline == 0 {
				wrs[i].SGE = a.sendSGE(0, len("from the SGE"))
			}
		}
		n, err := a.qp.PostSend(wrs)
		require.NoError(t, err)
		require.Equal(t, len(wrs), n)
	}
	run := make([][]byte, 5)
	for i := range run {
		run[i] = bytes.Repeat([]byte{byte('a' + i)}, 1000)
		want = append(want, bytes.Clone(run[i]))
	}
	post(run, verbs.SendInline)
	lone := []byte("lone inline datagram")
	want = append(want, bytes.Clone(lone))
	post([][]byte{lone}, verbs.SendInline)
	want = append(want, []byte{})
	post([][]byte{{}}, verbs.SendInline)
	for _, p := range append(run, lone) {
		for i := range p {
			p[i] = 0xEE // the caller reuses its buffers at once
		}
	}
	copy(a.sendBuf(0), "from the SGE")
	want = append(want, []byte("from the SGE"))
	post([][]byte{[]byte("ignored inline")}, 0)

	wcs := b.recv(len(want), 2*time.Second)
	require.Len(t, wcs, len(want))
	for i, wc := range wcs {
		require.Equal(t, verbs.WCSuccess, wc.Status)
		assert.Equal(t, want[i], b.buf(wc)[verbs.GRHSize:], "datagram %d", i)
	}
	assert.Zero(t, b.qp.Drops().BadICRC)
}

// The send CQ holds its depth of completions, and its waiter, with no
// channel fd, is woken by completions queued while it waits, by its
// deadline, Wake and Close.
func TestSendCQFullAndWaiter(t *testing.T) {
	a := newEndpoint(t, verbs.QPConfig{SendDepth: 4})
	m, ah := a.join("239.201.6.1", true)
	wrs := make([]verbs.SendWR, 6)
	for i := range wrs {
		wrs[i] = verbs.SendWR{WRID: uint64(i), SGE: a.sendSGE(0, 8), AH: ah, RemoteQPN: m.RemoteQPN, RemoteQKey: m.QKey, Flags: verbs.SendSignaled}
	}
	cq := a.qp.SendCQ()
	assert.Equal(t, -1, cq.Channel().Fd(), "the send CQ's channel needs no fd")
	w, err := cq.NewWaiter(0)
	require.NoError(t, err)
	var wcs [8]verbs.WC

	// Full: the CQ holds its depth, and the post stops there.
	n, err := a.qp.PostSend(wrs)
	assert.Equal(t, 4, n)
	assert.ErrorIs(t, err, verbs.ErrQueueFull)
	n, err = w.WaitPoll(wcs[:])
	require.NoError(t, err)
	require.Equal(t, 4, n)
	for i := range 4 {
		assert.Equal(t, uint64(i), wcs[i].WRID)
		assert.Equal(t, verbs.WCSend, wcs[i].Opcode)
	}

	require.NoError(t, w.SetDeadline(time.Now().Add(20*time.Millisecond)))
	n, err = w.WaitPoll(wcs[:])
	assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
	assert.Zero(t, n)
	require.NoError(t, w.SetDeadline(time.Time{}))

	// A completion queued while it sleeps (a post from another
	// goroutine) wakes it.
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := w.WaitPoll(wcs[:])
		done <- result{n, err}
	}()
	time.Sleep(10 * time.Millisecond) // let it sleep
	n, err = a.qp.PostSend(wrs[4:5])
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	select {
	case r := <-done:
		require.NoError(t, r.err)
		require.Equal(t, 1, r.n, "completions the woken WaitPoll found")
		assert.Equal(t, uint64(4), wcs[0].WRID)
	case <-time.After(5 * time.Second):
		t.Fatal("WaitPoll not woken by the completion of a PostSend")
	}

	// A deadline set while it sleeps ends it.
	go func() {
		n, err := w.WaitPoll(wcs[:])
		done <- result{n, err}
	}()
	time.Sleep(10 * time.Millisecond)
	require.NoError(t, w.SetDeadline(time.Now()))
	r := <-done
	assert.ErrorIs(t, r.err, os.ErrDeadlineExceeded)
	require.NoError(t, w.SetDeadline(time.Time{}))

	w.Wake()
	n, err = w.WaitPoll(wcs[:])
	assert.NoError(t, err, "WaitPoll after Wake")
	assert.Zero(t, n)

	n, err = a.qp.PostSend(wrs[4:])
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	n, err = w.WaitPoll(wcs[:])
	require.NoError(t, err)
	assert.Equal(t, 2, n, "completions queued before the wait")

	go func() {
		n, err := w.WaitPoll(wcs[:])
		done <- result{n, err}
	}()
	time.Sleep(10 * time.Millisecond)
	require.NoError(t, w.Close())
	r = <-done
	assert.ErrorIs(t, r.err, net.ErrClosed)
	_, err = w.WaitPoll(wcs[:])
	assert.ErrorIs(t, err, net.ErrClosed)
}

// assertIPv4Checksum asserts that the 20-byte IPv4 header ip sums to
// 0xFFFF in ones' complement, its checksum included.
func assertIPv4Checksum(t *testing.T, ip []byte) {
	t.Helper()
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xFFFF {
		sum = sum&0xFFFF + sum>>16
	}
	assert.Equal(t, uint32(0xFFFF), sum, "IPv4 header checksum")
}

// readable epolls fd once, without waiting.
func readable(t *testing.T, fd int) bool {
	t.Helper()
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	require.NoError(t, err)
	defer unix.Close(ep)
	require.NoError(t, unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}))
	var evs [1]unix.EpollEvent
	n, err := unix.EpollWait(ep, evs[:], 0)
	require.NoError(t, err)
	return n == 1
}

func waitReadable(t *testing.T, fd int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if readable(t, fd) {
			return true
		}
		time.Sleep(time.Millisecond)
	}
	return false
}

// kicks counts the calls of a receive channel's kick.
type kicks struct{ n atomic.Int64 }

func (k *kicks) kick() { k.n.Add(1) }

func (k *kicks) waitFor(t *testing.T, want int64, timeout time.Duration) bool {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if k.n.Load() >= want {
			return true
		}
		time.Sleep(time.Millisecond)
	}
	return false
}

// The receive channel's fd is an epoll set over both sockets, its narrow
// fd the multicast socket: readable while a datagram waits, posted
// receive or not, quiet once Poll read it. A waiter that asks Narrow and
// is told to sleep narrow gets multicast on the narrow fd only, and a
// kick for unicast; after a unicast datagram it is told to sleep wide
// for a while, and the channel fd shows both again. Receives posted while
// none were kick in any mode.
func TestRecvChannelReadiness(t *testing.T) {
	a := newEndpoint(t, verbs.QPConfig{})
	s := newEndpoint(t, verbs.QPConfig{})
	m, _ := a.join("239.201.7.1", false)
	_, ah := s.join("239.201.7.1", true)
	ch := a.qp.RecvCQ().Channel()
	kk := soft.RecvWaiterHooksOf(a.qp)
	fd, nfd := ch.Fd(), kk.NarrowFd()
	var k kicks
	require.NoError(t, kk.SetKick(k.kick))
	uah, err := s.qp.CreateAH(verbs.AHAttr{DGID: a.id.Local().GID, IsGlobal: true, HopLimit: 64})
	require.NoError(t, err)
	var wcs [4]verbs.WC
	poll := func(want int) {
		t.Helper()
		n, err := a.qp.RecvCQ().Poll(wcs[:])
		require.NoError(t, err)
		require.Equal(t, want, n)
	}
	assert.False(t, readable(t, fd), "readable before anything was sent")
	assert.False(t, readable(t, nfd), "narrow fd readable before anything was sent")

	// Before anyone asks Narrow the channel fd shows everything. No
	// receive posted: the datagram waits in the socket.
	s.send(ah, m.RemoteQPN, []byte("x"), 0, 0)
	assert.True(t, waitReadable(t, fd, time.Second), "a multicast datagram waits")
	assert.True(t, readable(t, nfd), "the narrow fd shows a multicast datagram")
	poll(0)

	// Posting receives kicks: the fd's edge came when nothing was posted.
	a.postRecvs(0, 8)
	assert.Equal(t, int64(1), k.n.Load(), "posting receives into an empty queue kicks")
	a.postRecvs(8, 1)
	assert.Equal(t, int64(1), k.n.Load(), "posting into a non-empty queue does not")
	ev, err := ch.GetEvents()
	assert.NoError(t, err)
	assert.Equal(t, 0, ev)
	poll(1)
	assert.False(t, readable(t, fd), "readable once drained")
	assert.False(t, readable(t, nfd), "narrow fd readable once drained")

	// Narrow: multicast shows on the narrow fd alone.
	require.True(t, kk.Narrow(), "narrow before any unicast")
	s.send(ah, m.RemoteQPN, []byte("y"), 0, 0)
	assert.True(t, waitReadable(t, nfd, time.Second), "narrow fd quiet after a multicast send")
	assert.False(t, readable(t, fd), "the channel fd shows multicast while the waiter sleeps narrow")
	poll(1)

	// Unicast while narrow: no fd of the waiter's shows it, the kick
	// comes, Poll finds it, and the next waits are wide.
	before := k.n.Load()
	s.send(uah, a.qp.QPN(), []byte("u"), 0, 0)
	assert.True(t, k.waitFor(t, before+1, time.Second), "a unicast datagram did not kick")
	assert.False(t, readable(t, nfd), "the multicast socket shows unicast")
	assert.False(t, readable(t, fd), "the channel fd shows something while the waiter sleeps narrow")
	poll(1)
	assert.Equal(t, []byte("u"), a.buf(wcs[0])[verbs.GRHSize:])
	for i := range 64 {
		require.False(t, kk.Narrow(), "wait %d after a unicast datagram should be wide", i)
	}
	// Wide: the channel fd shows both, and unicast needs no kick.
	before = k.n.Load()
	s.send(uah, a.qp.QPN(), []byte("w"), 0, 0)
	assert.True(t, waitReadable(t, fd, time.Second))
	poll(1)
	s.send(ah, m.RemoteQPN, []byte("z"), 0, 0)
	assert.True(t, waitReadable(t, fd, time.Second), "the channel fd shows multicast while wide")
	poll(1)
	time.Sleep(20 * time.Millisecond)
	assert.Equal(t, before, k.n.Load(), "kicked while sleeping wide")
	// A unicast datagram that came while wide and is still unread when
	// the waiter turns narrow is read by the next Poll (which, narrow,
	// looks at the unicast socket only when told to), not left for the
	// watch's kick.
	s.send(uah, a.qp.QPN(), []byte("q"), 0, 0)
	assert.True(t, waitReadable(t, fd, time.Second))
	for range 64 {
		kk.Narrow()
	}
	require.True(t, kk.Narrow(), "narrow again 64 waits after the last unicast datagram")
	poll(1)
	assert.Equal(t, []byte("q"), a.buf(wcs[0])[verbs.GRHSize:])

	// Without a kick registered nothing is called, and Poll still finds
	// the datagram.
	require.NoError(t, kk.SetKick(nil))
	before = k.n.Load()
	s.send(uah, a.qp.QPN(), []byte("v"), 0, 0)
	time.Sleep(50 * time.Millisecond)
	assert.Equal(t, before, k.n.Load(), "kicked after SetKick(nil)")
	poll(1)
}

func TestNoRecvPostedOverflow(t *testing.T) {
	a := newEndpoint(t, verbs.QPConfig{})
	s := newEndpoint(t, verbs.QPConfig{SendDepth: 64})
	m, _ := a.join("239.201.8.1", false)
	_, ah := s.join("239.201.8.1", true)
	wrs := make([]verbs.SendWR, 64)
	for i := range wrs {
		wrs[i] = verbs.SendWR{WRID: uint64(i), SGE: s.sendSGE(0, 1024), AH: ah, RemoteQPN: m.RemoteQPN, RemoteQKey: m.QKey}
	}
	const total = 190 * 64 // far past the socket buffer (SO_RCVBUF is at most rmem_max)
	for sent := 0; sent < total; sent += len(wrs) {
		n, err := s.qp.PostSend(wrs)
		require.NoError(t, err)
		require.Equal(t, len(wrs), n)
	}
	// Drain it all: the kernel reports its drops on the datagrams queued
	// after them (SO_RXQ_OVFL).
	got := 0
	for {
		a.postRecvs(0, nBufs)
		wcs := a.recv(nBufs, 200*time.Millisecond)
		got += len(wcs)
		if len(wcs) < nBufs {
			break
		}
	}
	assert.Greater(t, got, nBufs, "queued datagrams not delivered once receives were posted")
	assert.Less(t, got, total, "nothing was dropped")
	d := a.qp.Drops()
	assert.NotZero(t, d.Overflow, "socket buffer overflow not counted")
	t.Logf("sent %d with no receive posted: received %d, overflow %d %+v", total, got, d.Overflow, d)
	assert.Equal(t, uint64(total-got), d.Overflow, "every datagram is either received or counted")
	assert.Contains(t, a.qp.DropCounts(), verbs.DropOverflow)
}

// TestReceiveLayouts covers both ways a datagram lands in a posted buffer:
// whole, in place (a buffer with room past GRH + MTU for ImmDt, pad and
// ICRC: headers in the GRH area, then rewritten as the GRH), and scattered
// over scratch and the buffer (a buffer of exactly GRH + MTU). Each gets
// empty, odd-sized and MTU-sized payloads, with and without ImmDt; the
// payload, ImmDt and GRH must come out the same, and nothing past the
// posted length may be written.
func TestReceiveLayouts(t *testing.T) {
	for _, only := range []bool{false, true} {
		t.Run(fmt.Sprintf("GRHAddressesOnly=%v", only), func(t *testing.T) { testReceiveLayouts(t, only) })
	}
}

// testReceiveLayouts: with GRHAddressesOnly, the reads are bare (no
// control messages; recvfrom for one datagram in place).
func testReceiveLayouts(t *testing.T, addrOnly bool) {
	a := newEndpoint(t, verbs.QPConfig{})
	b := newEndpoint(t, verbs.QPConfig{GRHAddressesOnly: addrOnly})
	mtu := b.id.Local().MTU
	require.Equal(t, 4096, mtu, "lo's RoCE MTU")
	ah, err := a.qp.CreateAH(verbs.AHAttr{DGID: b.id.Local().GID, IsGlobal: true, HopLimit: 64})
	require.NoError(t, err)
	const slack = 4 + 3 + 4 // ImmDt, pad, ICRC
	for _, layout := range []struct {
		name string
		size int
	}{{"scattered", verbs.GRHSize + mtu}, {"in-place", verbs.GRHSize + mtu + slack}} {
		for _, tc := range []struct {
			n   int
			imm bool
		}{{0, false}, {29, true}, {29, false}, {mtu - 1, true}, {mtu, true}, {mtu, false}} {
			t.Run(fmt.Sprintf("%s/%d/imm=%v", layout.name, tc.n, tc.imm), func(t *testing.T) {
				// One buffer at the start of the receive half, poisoned
				// past its posted length.
				region := b.arena.Slice(0, uint32(layout.size+64))
				for i := range region {
					region[i] = 0xA5
				}
				_, err := b.qp.PostRecv([]verbs.RecvWR{{WRID: 9, SGE: verbs.SGE{Length: uint32(layout.size), LKey: b.mr.LKey()}}})
				require.NoError(t, err)
				msg := make([]byte, tc.n)
				for i := range msg {
					msg[i] = byte(i*7 + tc.n)
				}
				var flags verbs.SendFlags
				if tc.imm {
					flags = verbs.SendWithImm
				}
				a.send(ah, b.qp.QPN(), msg, flags, 0xC0FFEE00+uint32(tc.n))
				wcs := b.recv(1, 2*time.Second)
				require.Len(t, wcs, 1)
				wc := wcs[0]
				require.Equal(t, verbs.WCSuccess, wc.Status)
				assert.Equal(t, uint64(9), wc.WRID)
				assert.Equal(t, uint32(verbs.GRHSize+tc.n), wc.ByteLen)
				assert.Equal(t, tc.imm, wc.Flags&verbs.WCWithImm != 0)
				if tc.imm {
					assert.Equal(t, 0xC0FFEE00+uint32(tc.n), wc.Imm)
				}
				assert.Equal(t, msg, region[verbs.GRHSize:verbs.GRHSize+tc.n], "payload")
				grh := region[:verbs.GRHSize]
				assert.Equal(t, make([]byte, 20), grh[:20], "GRH bytes 0-19")
				ip := grh[20:]
				hdrs := 12 + 8
				if tc.imm {
					hdrs += 4
				}
				assert.Equal(t, uint16(20+8+hdrs+tc.n+(-tc.n&3)+4), binary.BigEndian.Uint16(ip[2:]), "IP total length")
				assert.Equal(t, a.id.Local().IP.To4(), net.IP(ip[12:16]))
				assert.Equal(t, b.id.Local().IP.To4(), net.IP(ip[16:20]))
				assertIPv4Checksum(t, ip)
				requireGuard(t, region, layout.size)
			})
		}
	}
}

// TestGRHAddressesOnly: a QP created with GRHAddressesOnly gets the GRH's
// addresses and a well-formed IPv4 header with TTL and TOS zero (no
// control messages asked for them); one without gets the real TTL.
func TestGRHAddressesOnly(t *testing.T) {
	a := newEndpoint(t, verbs.QPConfig{})
	for _, only := range []bool{false, true} {
		b := newEndpoint(t, verbs.QPConfig{GRHAddressesOnly: only})
		b.postRecvs(0, 1)
		ip := b.buf(a.unicastTo(b, []byte("addresses")))[20:verbs.GRHSize]
		assert.Equal(t, a.id.Local().IP.To4(), net.IP(ip[12:16]), "source")
		assert.Equal(t, b.id.Local().IP.To4(), net.IP(ip[16:20]), "destination")
		assert.Equal(t, byte(0), ip[1], "TOS (the sender sets none)")
		if only {
			assert.Equal(t, byte(0), ip[8], "TTL left zero")
		} else {
			assert.Equal(t, byte(64), ip[8], "TTL of a unicast send on lo")
		}
		assertIPv4Checksum(t, ip)
	}
}

// TestMRClose: a closed MR's LKey is refused from then on, by PostSend
// and PostRecv alike ("not registered", not a short buffer), and the
// QP's other MRs, registered before and after it, still serve.
func TestMRClose(t *testing.T) {
	a := newEndpoint(t, verbs.QPConfig{})
	var mrs [2]verbs.MR
	for i := range mrs {
		ar, err := verbs.NewArena(bufSize)
		require.NoError(t, err)
		t.Cleanup(func() { ar.Free() })
		mrs[i], err = a.qp.RegisterMemory(ar)
		require.NoError(t, err)
	}
	require.NoError(t, mrs[0].Close())
	m, ah := a.join("239.201.5.2", true)
	send := func(lkey uint32) error {
		_, err := a.qp.PostSend([]verbs.SendWR{{SGE: verbs.SGE{Length: 10, LKey: lkey}, AH: ah, RemoteQPN: m.RemoteQPN, RemoteQKey: m.QKey}})
		return err
	}
	require.ErrorContains(t, send(mrs[0].LKey()), "not registered", "got PostSend with a closed MR's LKey, want it refused")
	n, err := a.qp.PostRecv([]verbs.RecvWR{{SGE: verbs.SGE{Length: bufSize, LKey: mrs[0].LKey()}}})
	require.Equal(t, 0, n, "got %d receives posted with a closed MR's LKey, want 0", n)
	require.ErrorContains(t, err, "not registered", "got PostRecv error %v, want the LKey refused", err)
	require.NoError(t, send(a.mr.LKey()), "the MR registered before the closed one")
	require.NoError(t, send(mrs[1].LKey()), "the MR registered after the closed one")
}

// Leave of an MGID that is no IPv4-mapped multicast GID says so; it is
// not taken for some group not joined.
func TestLeaveBadMGID(t *testing.T) {
	a := newEndpoint(t, verbs.QPConfig{})
	a.join("239.201.5.3", false)
	err := a.id.Leave(verbs.GID{0xff, 0x0e})
	require.ErrorIs(t, err, verbs.ErrNotSupported, "got Leave of an IPv6 MGID %v, want ErrNotSupported", err)
}

// A batch of signaled WRs takes what room the send CQ has left and stops
// there, though none of its own completions is queued yet when the next
// WR asks: 6 of a CQ of 8 held, a batch of 4 posts 2 and stops with
// ErrQueueFull, and the CQ holds 8.
func TestSignaledBatchStopsAtCQRoom(t *testing.T) {
	a := newEndpoint(t, verbs.QPConfig{SendDepth: 8})
	m, ah := a.join("239.201.6.9", true)
	post := func(first, k int) (int, error) {
		wrs := make([]verbs.SendWR, k)
		for i := range wrs {
			wrs[i] = verbs.SendWR{WRID: uint64(first + i), SGE: a.sendSGE(0, 8), AH: ah, RemoteQPN: m.RemoteQPN, RemoteQKey: m.QKey, Flags: verbs.SendSignaled}
		}
		return a.qp.PostSend(wrs)
	}
	n, err := post(0, 6)
	require.NoError(t, err)
	require.Equal(t, 6, n)
	n, err = post(6, 4)
	assert.ErrorIs(t, err, verbs.ErrQueueFull, "a batch of 4 with room for 2")
	assert.Equal(t, 2, n, "WRs of the batch posted")
	var wcs [16]verbs.WC
	n, err = a.qp.SendCQ().Poll(wcs[:])
	require.NoError(t, err)
	require.Equal(t, 8, n, "completions on the send CQ of 8")
	for i := range n {
		assert.Equal(t, uint64(i), wcs[i].WRID)
	}
}
