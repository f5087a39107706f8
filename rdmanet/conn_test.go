//go:build linux

package rdmanet_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-rdma/rdmanet/rdmanet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadFromBlocksUntilData(t *testing.T) {
	t.Parallel()
	g := newGroup()
	rx := listen(t, g)
	tx := listen(t, g)
	got := make(chan string, 1)
	go func() {
		buf := make([]byte, 100)
		n, _, err := rx.ReadFrom(buf)
		if err != nil {
			got <- "error: " + err.Error()
			return
		}
		got <- string(buf[:n])
	}()
	select {
	case s := <-got:
		t.Fatalf("ReadFrom returned %q before anything was sent", s)
	case <-time.After(100 * time.Millisecond):
	}
	_, err := tx.WriteTo([]byte("ping"), g)
	require.NoError(t, err)
	select {
	case s := <-got:
		require.Equal(t, "ping", s)
	case <-time.After(5 * time.Second):
		t.Fatal("ReadFrom did not return after a write")
	}
}

func TestSenderAddress(t *testing.T) {
	t.Parallel()
	g := newGroup()
	rx := listen(t, g)
	tx := listen(t, g)
	_, err := tx.WriteTo([]byte("who"), g)
	require.NoError(t, err)
	b, from := mustRead(t, rx)
	require.Equal(t, "who", string(b))
	self := tx.LocalAddr().(*rdmanet.Addr)
	require.Equal(t, *self, *from, "sender address: got %v, want %v", from, self)
	require.NotNil(t, from.IP(), "a RoCE GID carries an IP")
	require.Equal(t, "rdma", from.Network())
	parsed, err := rdmanet.ParseAddr(from.String())
	require.NoError(t, err)
	require.Equal(t, *from, parsed)
}

func TestPastDeadlineReturnsAtOnce(t *testing.T) {
	t.Parallel()
	g := newGroup()
	c := listen(t, g)
	tx := listen(t, g)
	// Data is waiting, yet a past deadline wins, as with net.UDPConn.
	_, err := tx.WriteTo([]byte("x"), g)
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(-time.Second)))
	start := time.Now()
	_, _, err = c.ReadFrom(make([]byte, 10))
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	require.True(t, isTimeout(err), "Timeout() must be true for %v", err)
	var op *net.OpError
	require.ErrorAs(t, err, &op)
	require.Less(t, time.Since(start), 500*time.Millisecond)
}

func TestMovingDeadlineWhileBlocked(t *testing.T) {
	t.Parallel()
	c := listen(t, newGroup())
	errc := make(chan error, 1)
	go func() {
		_, _, err := c.ReadFrom(make([]byte, 10))
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(20*time.Millisecond)))
	select {
	case err := <-errc:
		require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	case <-time.After(5 * time.Second):
		t.Fatal("moving the deadline did not unblock ReadFrom")
	}
	// Extending it again lets reads block again.
	require.NoError(t, c.SetReadDeadline(time.Now().Add(time.Hour)))
	require.NoError(t, c.SetReadDeadline(time.Time{}))
}

func TestCloseUnblocksAndLaterCallsFail(t *testing.T) {
	t.Parallel()
	g := newGroup()
	c := listen(t, g)
	const readers = 4
	errc := make(chan error, readers)
	for i := 0; i < readers; i++ {
		go func() {
			_, _, err := c.ReadFrom(make([]byte, 10))
			errc <- err
		}()
	}
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, c.Close())
	for i := 0; i < readers; i++ {
		select {
		case err := <-errc:
			require.ErrorIs(t, err, net.ErrClosed)
		case <-time.After(5 * time.Second):
			t.Fatal("Close did not unblock ReadFrom")
		}
	}
	require.ErrorIs(t, c.Close(), net.ErrClosed, "a second Close fails, as net.UDPConn's")
	_, _, err := c.ReadFrom(make([]byte, 10))
	require.ErrorIs(t, err, net.ErrClosed)
	_, err = c.WriteTo([]byte("x"), g)
	require.ErrorIs(t, err, net.ErrClosed)
	_, _, err = c.ReadFromAddr(make([]byte, 10))
	require.ErrorIs(t, err, net.ErrClosed)
	_, err = c.ReadBatch(make([]rdmanet.Message, 1))
	require.ErrorIs(t, err, net.ErrClosed)
	_, err = c.WriteBatch([]rdmanet.Message{{Buffer: []byte("x")}})
	require.ErrorIs(t, err, net.ErrClosed)
	require.ErrorIs(t, c.SetDeadline(time.Now()), net.ErrClosed)
	require.ErrorIs(t, c.SetReadDeadline(time.Now()), net.ErrClosed)
	require.ErrorIs(t, c.SetWriteDeadline(time.Now()), net.ErrClosed)
	require.ErrorIs(t, c.JoinGroup(nil, newGroup()), net.ErrClosed)
	require.ErrorIs(t, c.LeaveGroup(nil, g), net.ErrClosed)
	require.ErrorIs(t, c.SetMulticastLoopback(false), net.ErrClosed)
}

func TestConcurrentReadersWritersExactlyOnce(t *testing.T) {
	t.Parallel()
	g := newGroup()
	rx := listen(t, g, func(lc *rdmanet.ListenConfig) { lc.RecvDepth = 4096 })
	tx := listen(t, g)
	const writers, perWriter, readers = 4, 200, 4
	total := writers * perWriter
	var mu sync.Mutex
	seen := map[string]int{}
	var rwg sync.WaitGroup
	for i := 0; i < readers; i++ {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			buf := make([]byte, 64)
			for {
				n, _, err := rx.ReadFrom(buf)
				if err != nil {
					return
				}
				mu.Lock()
				seen[string(buf[:n])]++
				mu.Unlock()
			}
		}()
	}
	var wwg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wwg.Add(1)
		go func(w int) {
			defer wwg.Done()
			for i := 0; i < perWriter; i++ {
				if _, err := tx.WriteTo([]byte(fmt.Sprintf("w%d-%d", w, i)), g); err != nil {
					t.Error(err)
					return
				}
				if i%32 == 31 {
					time.Sleep(time.Millisecond) // stay inside the receive ring
				}
			}
		}(w)
	}
	wwg.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n == total {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // a duplicate would show up now
	rx.Close()
	rwg.Wait()
	require.Len(t, seen, total, "distinct messages received")
	for k, v := range seen {
		require.Equal(t, 1, v, "message %q received %d times", k, v)
	}
	st := rx.Stats()
	require.Equal(t, uint64(total), st.Received)
}

func TestTwoConnsOnOneGroupBothReceive(t *testing.T) {
	t.Parallel()
	g := newGroup()
	a := listen(t, g)
	b := listen(t, g)
	other := listen(t, newGroup())
	tx := listen(t, nil)
	require.NoError(t, tx.JoinGroup(nil, g))
	for i := 0; i < 20; i++ {
		_, err := tx.WriteTo([]byte(fmt.Sprint("m", i)), g)
		require.NoError(t, err)
	}
	for _, c := range []*rdmanet.Conn{a, b} {
		for i := 0; i < 20; i++ {
			got, _ := mustRead(t, c)
			require.Equal(t, fmt.Sprint("m", i), string(got))
		}
	}
	expectNothing(t, other, 100*time.Millisecond)
}

func TestLeaveGroupStopsDelivery(t *testing.T) {
	t.Parallel()
	g := newGroup()
	rx := listen(t, g)
	tx := listen(t, g)
	_, err := tx.WriteTo([]byte("before"), g)
	require.NoError(t, err)
	b, _ := mustRead(t, rx)
	require.Equal(t, "before", string(b))
	require.NoError(t, rx.LeaveGroup(nil, g))
	require.Error(t, rx.LeaveGroup(nil, g), "leaving twice")
	_, err = tx.WriteTo([]byte("after"), g)
	require.NoError(t, err)
	expectNothing(t, rx, 150*time.Millisecond)
	// Writes to a group the conn left fail clearly.
	_, err = rx.WriteTo([]byte("x"), g)
	require.ErrorContains(t, err, "not joined")
}

// TestWriteToLeftGroupFails: a conn that has just written to a group
// (the send side remembers its last group) and then leaves it gets "not
// joined" for the next write there, and writes again once it rejoins.
func TestWriteToLeftGroupFails(t *testing.T) {
	t.Parallel()
	g := newGroup()
	c := listen(t, g)
	for i := range 3 {
		_, err := c.WriteTo([]byte("joined"), g)
		require.NoError(t, err, "write %d", i)
	}
	require.NoError(t, c.LeaveGroup(nil, g))
	_, err := c.WriteTo([]byte("left"), g)
	require.ErrorContains(t, err, "not joined")
	require.NoError(t, c.JoinGroup(nil, g))
	_, err = c.WriteTo([]byte("rejoined"), g)
	require.NoError(t, err)
}

func TestSeveralGroupsOnOneConn(t *testing.T) {
	t.Parallel()
	g1, g2 := newGroup(), newGroup()
	rx := listen(t, g1)
	require.NoError(t, rx.JoinGroup(nil, g2))
	require.Error(t, rx.JoinGroup(nil, g2), "joining twice")
	require.Len(t, rx.Groups(), 2)
	tx := listen(t, g1)
	require.NoError(t, tx.JoinGroup(nil, g2))
	_, err := tx.WriteTo([]byte("one"), g1)
	require.NoError(t, err)
	_, err = tx.WriteTo([]byte("two"), g2)
	require.NoError(t, err)
	got := map[string]bool{}
	for i := 0; i < 2; i++ {
		b, _ := mustRead(t, rx)
		got[string(b)] = true
	}
	require.Equal(t, map[string]bool{"one": true, "two": true}, got)
}

func TestLoopbackOff(t *testing.T) {
	t.Parallel()
	g := newGroup()
	self := listen(t, g)
	peer := listen(t, g)
	_, err := self.WriteTo([]byte("echo"), g)
	require.NoError(t, err)
	b, _ := mustRead(t, self)
	require.Equal(t, "echo", string(b), "loopback is on by default")
	mustRead(t, peer)
	require.Zero(t, self.Stats().Loopback, "Stats().Loopback with loopback on")

	require.NoError(t, self.SetMulticastLoopback(false))
	require.False(t, self.MulticastLoopback())
	_, err = self.WriteTo([]byte("quiet"), g)
	require.NoError(t, err)
	expectNothing(t, self, 150*time.Millisecond)
	b, _ = mustRead(t, peer)
	require.Equal(t, "quiet", string(b), "other conns still receive")
	// Filtered by the conn as it read: counted once.
	require.Equal(t, uint64(1), self.Stats().Loopback, "Stats().Loopback after one own datagram filtered")
	require.Zero(t, peer.Stats().Loopback, "Stats().Loopback of a conn that got only others' datagrams")

	off := listen(t, g, func(lc *rdmanet.ListenConfig) { lc.DisableLoopback = true })
	_, err = off.WriteTo([]byte("cfg"), g)
	require.NoError(t, err)
	expectNothing(t, off, 150*time.Millisecond)
	// Blocked below the conn: a device, or the software QP's kernel
	// socket filter (selffilter.go), drops it without a count; what
	// reaches the QP's own check is counted. Never more than once.
	if bk := off.Backend(); bk.LoopbackBlocked {
		require.LessOrEqual(t, off.Stats().Loopback, uint64(1), "Stats().Loopback after one own datagram blocked (%s)", bk.Name)
	} else {
		require.Equal(t, uint64(1), off.Stats().Loopback, "Stats().Loopback after one own datagram filtered (%s)", bk.Name)
	}
}

// An own datagram of no payload, with loopback turned off, is filtered
// and counted as the others are: its receive buffer holds only the GRH
// area (40 bytes), from which the filter reads the sender's and the
// destination's GIDs. The reads meanwhile return only the peer's
// datagrams. The own one's place among them is not the test's to choose,
// so the peer sends until a read has passed the own one (counted). The
// reads run on a goroutine of their own: a panic in one ends the test
// binary at once, where on the test's goroutine it would leave the
// conn's read lock held and the cleanup's Close waiting for it.
func TestLoopbackOffFiltersEmptyDatagram(t *testing.T) {
	t.Parallel()
	g := newGroup()
	self := listen(t, g)
	peer := listen(t, g)
	require.NoError(t, self.SetMulticastLoopback(false))
	_, err := self.WriteTo(nil, g)
	require.NoError(t, err)
	b, _ := mustRead(t, peer)
	require.Empty(t, b, "the peer gets the empty datagram")
	for i := 0; self.Stats().Loopback == 0; i++ {
		require.Less(t, i, 100, "own empty datagram not filtered after %d of the peer's", i)
		want := fmt.Sprint("peer ", i)
		_, err := peer.WriteTo([]byte(want), g)
		require.NoError(t, err)
		type got struct {
			b    []byte
			from *rdmanet.Addr
			err  error
		}
		done := make(chan got, 1)
		go func() {
			b, from, err := read(t, self, 5*time.Second)
			done <- got{b, from, err}
		}()
		r := <-done
		require.NoError(t, r.err)
		require.Equal(t, want, string(r.b), "a read with loopback off")
		require.Equal(t, peer.LocalAddr().(*rdmanet.Addr).QPN, r.from.QPN)
	}
	require.Equal(t, uint64(1), self.Stats().Loopback, "Stats().Loopback after one own datagram filtered")
}

// A conn joined to two groups that writes to each in turn sends every
// datagram to the group it names (the write path keeps the last group
// it looked up): each group's member gets its own group's datagrams, in
// order, and none of the other's.
func TestWritesAlternatingGroups(t *testing.T) {
	t.Parallel()
	g1, g2 := newGroup(), newGroup()
	tx := listen(t, g1)
	require.NoError(t, tx.JoinGroup(nil, g2))
	rx1, rx2 := listen(t, g1), listen(t, g2)
	const rounds = 4
	for i := range rounds {
		for _, g := range []*net.UDPAddr{g1, g2} {
			_, err := tx.WriteTo([]byte(fmt.Sprint(g.IP, " ", i)), g)
			require.NoError(t, err)
		}
	}
	// A last datagram to each: what a member reads before it is all it
	// got.
	for _, g := range []*net.UDPAddr{g1, g2} {
		_, err := tx.WriteTo([]byte(fmt.Sprint(g.IP, " end")), g)
		require.NoError(t, err)
	}
	for _, m := range []struct {
		rx *rdmanet.Conn
		g  *net.UDPAddr
	}{{rx1, g1}, {rx2, g2}} {
		for i := range rounds {
			b, _ := mustRead(t, m.rx)
			require.Equal(t, fmt.Sprint(m.g.IP, " ", i), string(b), "member of %v, datagram %d", m.g.IP, i)
		}
		b, _ := mustRead(t, m.rx)
		require.Equal(t, fmt.Sprint(m.g.IP, " end"), string(b), "member of %v, the last datagram", m.g.IP)
	}
}

func TestOversizedWriteFails(t *testing.T) {
	t.Parallel()
	g := newGroup()
	c := listen(t, g)
	mtu := c.MTU()
	require.Greater(t, mtu, 0)
	_, err := c.WriteTo(make([]byte, mtu+1), g)
	require.ErrorIs(t, err, rdmanet.ErrMessageTooLong)
	require.ErrorContains(t, err, "MTU")
	var op *net.OpError
	require.ErrorAs(t, err, &op)
	require.Equal(t, "write", op.Op)
	require.Zero(t, c.Stats().Sent, "nothing may be sent")
	expectNothing(t, c, 100*time.Millisecond)
	// Exactly MTU bytes go through.
	n, err := c.WriteTo(bytes.Repeat([]byte{7}, mtu), g)
	require.NoError(t, err)
	require.Equal(t, mtu, n)
	b, _ := mustRead(t, c)
	require.Len(t, b, mtu)
}

func TestShortBufferTruncates(t *testing.T) {
	t.Parallel()
	g := newGroup()
	c := listen(t, g)
	_, err := c.WriteTo([]byte("0123456789"), g)
	require.NoError(t, err)
	buf := make([]byte, 4)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, _, err := c.ReadFrom(buf)
	require.NoError(t, err, "truncation is not an error, as with UDP")
	require.Equal(t, 4, n)
	require.Equal(t, "0123", string(buf))
	require.Equal(t, uint64(1), c.Stats().Truncated)
}

func TestZeroLengthMessage(t *testing.T) {
	t.Parallel()
	g := newGroup()
	c := listen(t, g)
	n, err := c.WriteTo(nil, g)
	require.NoError(t, err)
	require.Zero(t, n)
	b, from := mustRead(t, c)
	require.Empty(t, b)
	require.Equal(t, c.LocalAddr().(*rdmanet.Addr).QPN, from.QPN)
}

func TestBadAddresses(t *testing.T) {
	t.Parallel()
	g := newGroup()
	c := listen(t, g)
	cases := []struct {
		name string
		addr net.Addr
		want string
	}{
		{"nil", nil, "missing address"},
		{"nil UDPAddr", (*net.UDPAddr)(nil), "missing address"},
		{"nil IPAddr", (*net.IPAddr)(nil), "missing address"},
		{"nil Addr", (*rdmanet.Addr)(nil), "missing address"},
		{"unicast IP", &net.IPAddr{IP: net.IPv4(127, 0, 0, 1)}, "not a multicast group"},
		{"unicast UDP", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9}, "not a multicast group"},
		{"TCP", &net.TCPAddr{IP: net.IPv4(239, 1, 1, 1)}, "want the group's"},
		{"unix", &net.UnixAddr{Name: "/tmp/x", Net: "unixgram"}, "want the group's"},
		{"unjoined group", &net.UDPAddr{IP: net.IPv4(239, 9, 9, 9)}, "not joined"},
		{"zero Addr", &rdmanet.Addr{}, "missing address"},
		{"QPN too big", &rdmanet.Addr{GID: c.LocalAddr().(*rdmanet.Addr).GID, QPN: 1 << 24}, "not a unicast UD address"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.WriteTo([]byte("x"), tc.addr)
			require.Error(t, err)
			require.ErrorContains(t, err, tc.want)
			var op *net.OpError
			require.ErrorAs(t, err, &op)
		})
	}
	require.Zero(t, c.Stats().Sent)
	// Groups: non-multicast and wrong family.
	lc := testConfig()
	_, err := lc.ListenMulticast(t.Context(), "rdma", nil, &net.UDPAddr{IP: net.IPv4(10, 0, 0, 1)})
	require.ErrorContains(t, err, "not a multicast group")
	_, err = lc.ListenMulticast(t.Context(), "rdma6", nil, g)
	require.ErrorContains(t, err, "wrong address family")
	// An IPv6 group: RoCE v2 multicast takes IPv4 groups only, on both
	// backends (rdma_cm's ENOTSUPP).
	_, err = lc.ListenMulticast(t.Context(), "rdma6", nil, &net.UDPAddr{IP: net.ParseIP("ff12::4791")})
	require.ErrorContains(t, err, "IPv6 multicast groups are not supported on RoCE v2")
	require.ErrorContains(t, err, "use an IPv4 group")
	require.ErrorIs(t, err, rdmanet.ErrNotSupported)
	_, err = lc.ListenMulticast(t.Context(), "udp", nil, g)
	require.Error(t, err)
	require.ErrorContains(t, c.JoinGroup(nil, &net.UDPAddr{IP: net.IPv4(10, 0, 0, 1)}), "not a multicast group")
	require.ErrorContains(t, c.JoinGroup(nil, nil), "missing address")
	require.ErrorContains(t, c.JoinGroup(&net.Interface{Name: "eth0"}, newGroup()), "bound to")
}

func TestUnicastReplyToSender(t *testing.T) {
	t.Parallel()
	g := newGroup()
	server := listen(t, g)
	client := listen(t, g)
	other := listen(t, g)
	_, err := client.WriteTo([]byte("request"), g)
	require.NoError(t, err)
	b, from := mustRead(t, server)
	require.Equal(t, "request", string(b))
	mustRead(t, other)
	mustRead(t, client) // loopback copy
	_, err = server.WriteTo([]byte("reply"), from)
	require.NoError(t, err)
	b, rfrom := mustRead(t, client)
	require.Equal(t, "reply", string(b))
	require.Equal(t, *server.LocalAddr().(*rdmanet.Addr), *rfrom)
	expectNothing(t, other, 100*time.Millisecond) // unicast reaches only its QP
}

// A unicast datagram wakes a reader already blocked (with a read deadline
// set) when no multicast traffic comes, and the deadline keeps working
// afterwards: the next read times out at it, not before and not never.
func TestUnicastWakesBlockedReader(t *testing.T) {
	t.Parallel()
	g := newGroup()
	server := listen(t, g)
	client := listen(t, g)
	require.NoError(t, client.SetReadDeadline(time.Now().Add(time.Hour)))
	type result struct {
		b   string
		err error
	}
	got := make(chan result, 1)
	go func() {
		buf := make([]byte, 64)
		n, _, err := client.ReadFrom(buf)
		got <- result{string(buf[:n]), err}
	}()
	select {
	case r := <-got:
		t.Fatalf("ReadFrom returned %+v before anything was sent", r)
	case <-time.After(100 * time.Millisecond):
	}
	_, err := server.WriteTo([]byte("unicast"), client.LocalAddr())
	require.NoError(t, err)
	select {
	case r := <-got:
		require.NoError(t, r.err)
		require.Equal(t, "unicast", r.b)
	case <-time.After(5 * time.Second):
		t.Fatal("a unicast datagram did not wake the blocked reader")
	}
	require.NoError(t, client.SetReadDeadline(time.Now().Add(200*time.Millisecond)))
	start := time.Now()
	_, _, err = client.ReadFrom(make([]byte, 64))
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	require.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond, "timed out before the deadline")
}

// Multicast and unicast datagrams in an irregular mix, with pauses that
// let the reader fall asleep between them: on the software backend the
// reader keeps switching between sleeping narrow (kicked for unicast) and
// wide, and not one datagram may be left waiting for a wake-up that
// never comes. (Unicast and multicast come through different sockets, so
// their order between them is not kept, as UD does not promise it.)
func TestMixedUnicastMulticastWakeups(t *testing.T) {
	t.Parallel()
	g := newGroup()
	rx := listen(t, g)
	tx := listen(t, g, func(lc *rdmanet.ListenConfig) { lc.SendOnly = true })
	const n = 600
	rng := rand.New(rand.NewPCG(1, 2))
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 64)
		seen := make(map[string]bool, n)
		for i := range n {
			rx.SetReadDeadline(time.Now().Add(5 * time.Second))
			k, _, err := rx.ReadFromAddr(buf)
			if err != nil {
				done <- fmt.Errorf("after %d messages: %w", i, err)
				return
			}
			if seen[string(buf[:k])] {
				done <- fmt.Errorf("%q twice", buf[:k])
				return
			}
			seen[string(buf[:k])] = true
		}
		for i := range n {
			if !seen[fmt.Sprint(i)] {
				done <- fmt.Errorf("message %d missing", i)
				return
			}
		}
		done <- nil
	}()
	for i := range n {
		var to net.Addr = g
		if rng.IntN(3) == 0 {
			to = rx.LocalAddr()
		}
		if _, err := tx.WriteTo([]byte(fmt.Sprint(i)), to); err != nil {
			t.Fatal(err)
		}
		switch rng.IntN(8) {
		case 0:
			time.Sleep(2 * time.Millisecond) // the reader sleeps
		case 1:
			time.Sleep(50 * time.Microsecond)
		}
	}
	require.NoError(t, <-done)
}

func TestGroupAddrAndBatches(t *testing.T) {
	t.Parallel()
	g := newGroup()
	rx := listen(t, g)
	rx2 := listen(t, g)
	tx := listen(t, g)
	ga, err := tx.GroupAddr(g)
	require.NoError(t, err)
	require.True(t, ga.IsMulticast())
	ms := make([]rdmanet.Message, 10)
	for i := range ms {
		ms[i] = rdmanet.Message{Buffer: []byte(fmt.Sprint("batch", i)), Addr: ga}
	}
	n, err := tx.WriteBatch(ms)
	require.NoError(t, err)
	require.Equal(t, 10, n)
	in := make([]rdmanet.Message, 16)
	for i := range in {
		in[i].Buffer = make([]byte, 64)
	}
	// Both members get all ten, in order (on the software backend the ten
	// equal-length datagrams went out as one UDP GSO message).
	for _, r := range []*rdmanet.Conn{rx, rx2} {
		got := 0
		r.SetReadDeadline(time.Now().Add(5 * time.Second))
		for got < 10 {
			k, err := r.ReadBatch(in)
			require.NoError(t, err)
			for i := 0; i < k; i++ {
				require.Equal(t, fmt.Sprint("batch", got), string(in[i].Buffer[:in[i].N]))
				require.Equal(t, *tx.LocalAddr().(*rdmanet.Addr), in[i].Addr)
				got++
			}
		}
	}
	// A bad message stops the batch: the ones before it were sent.
	bad := []rdmanet.Message{{Buffer: []byte("ok"), Addr: ga}, {Buffer: make([]byte, tx.MTU()+1), Addr: ga}}
	n, err = tx.WriteBatch(bad)
	require.ErrorIs(t, err, rdmanet.ErrMessageTooLong)
	require.Equal(t, 1, n)
}

// TestWriteBuffersReusableOnReturn overwrites each buffer as soon as
// WriteTo or WriteBatch returns: sends inline from the caller's buffer
// (every size on the software backend, up to MaxInline on rdma-core) and
// sends copied into the ring (larger ones on rdma-core) must both have
// taken their bytes by then.
func TestWriteBuffersReusableOnReturn(t *testing.T) {
	t.Parallel()
	g := newGroup()
	rx := listen(t, g)
	tx := listen(t, g, func(lc *rdmanet.ListenConfig) { lc.DisableLoopback = true })
	sizes := []int{0, 10, 300, tx.MTU()}
	var want [][]byte
	buf := make([]byte, tx.MTU())
	for i, n := range sizes {
		for j := range buf[:n] {
			buf[j] = byte(i + j)
		}
		want = append(want, bytes.Clone(buf[:n]))
		_, err := tx.WriteTo(buf[:n], g)
		require.NoError(t, err)
		for j := range buf {
			buf[j] = 0xEE
		}
	}
	ga, err := tx.GroupAddr(g)
	require.NoError(t, err)
	ms := make([]rdmanet.Message, len(sizes))
	for i, n := range sizes {
		ms[i] = rdmanet.Message{Buffer: make([]byte, n), Addr: ga}
		for j := range ms[i].Buffer {
			ms[i].Buffer[j] = byte(100 + i + j)
		}
		want = append(want, bytes.Clone(ms[i].Buffer))
	}
	n, err := tx.WriteBatch(ms)
	require.NoError(t, err)
	require.Equal(t, len(ms), n)
	for i := range ms {
		for j := range ms[i].Buffer {
			ms[i].Buffer[j] = 0xEE
		}
	}
	for i, w := range want {
		got, _ := mustRead(t, rx)
		require.Equal(t, w, got, "datagram %d (%d bytes)", i, len(w))
	}
}

func TestBackendReport(t *testing.T) {
	t.Parallel()
	c := listen(t, newGroup())
	b := c.Backend()
	if testDevice == "" {
		assert.Equal(t, "software", b.Name)
		assert.Equal(t, "lo", b.Netdev)
		assert.Equal(t, 4096, c.MTU(), "loopback gives a 4096-byte RoCE MTU")
	} else {
		assert.Equal(t, "rdma-core", b.Name)
	}
	assert.NotEmpty(t, b.String())
}

func TestErrorsAreOpErrors(t *testing.T) {
	t.Parallel()
	c := listen(t, newGroup())
	c.SetReadDeadline(time.Now().Add(-time.Second))
	_, _, err := c.ReadFrom(make([]byte, 1))
	var op *net.OpError
	require.True(t, errors.As(err, &op))
	require.Equal(t, "read", op.Op)
	require.Equal(t, "rdma", op.Net)
}

func TestBackendChoice(t *testing.T) {
	if testDevice != "" {
		t.Skip("checks the choice on a machine without RDMA devices")
	}
	g := newGroup()
	c, err := rdmanet.ListenMulticast("rdma", nil, g)
	require.NoError(t, err)
	require.Equal(t, "software", c.Backend().Name, "auto without an RDMA port serving loopback")
	c.Close()

	t.Setenv(rdmanet.EnvBackend, "nonsense")
	_, err = rdmanet.ListenMulticast("rdma", nil, g)
	require.ErrorContains(t, err, `unknown backend "nonsense"`)

	t.Setenv(rdmanet.EnvBackend, "rdma-core")
	_, err = rdmanet.ListenMulticast("rdma", nil, g)
	require.Error(t, err, "rdma-core has no device serving loopback here")

	t.Setenv(rdmanet.EnvBackend, "software")
	lc := rdmanet.ListenConfig{Backend: rdmanet.BackendRDMACore}
	c, err = lc.ListenMulticast(t.Context(), "rdma", nil, g)
	require.NoError(t, err, "the environment overrides the config")
	require.Equal(t, "software", c.Backend().Name)
	c.Close()
}

// A ReadBatch of no messages reads none and returns at once: 0 and no
// error on an open conn, 0 and net.ErrClosed after Close.
func TestReadBatchOfNone(t *testing.T) {
	t.Parallel()
	c := listen(t, newGroup())
	for _, ms := range [][]rdmanet.Message{nil, {}} {
		n, err := c.ReadBatch(ms)
		require.NoError(t, err)
		require.Zero(t, n)
	}
	require.NoError(t, c.Close())
	n, err := c.ReadBatch(nil)
	require.ErrorIs(t, err, net.ErrClosed)
	require.Zero(t, n)
}
