//go:build linux

package twohost

import (
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-rdma/rdmanet/rdmanet"
	"github.com/stretchr/testify/require"
)

// Paced well below what rxe takes under emulation: these tests are about
// delivery across the link, not rate (UD has no flow control).
const (
	crossN    = 200
	crossSize = 1000 // near the MTU (1024): a full-size frame crosses
	crossGap  = 2 * time.Millisecond
)

// requireAllGot checks the RESULT lines of a recv helper: want receivers,
// each with every message, all from the sender's address.
func requireAllGot(t *testing.T, out string, lines []string, want int, from net.IP) {
	t.Helper()
	require.Len(t, lines, want, "receivers' RESULT lines:\n%s", out)
	for _, l := range lines {
		require.Equal(t, strconv.Itoa(crossN), field(l, "got"), "%s\n%s", l, out)
		require.Equal(t, "0", field(l, "bad"), l)
		require.Equal(t, from.String(), field(l, "from"), l)
	}
}

// TestMulticastAToB: one sender on a, four receivers on b (two processes
// of two conns) and one more on a; every receiver gets every message.
func TestMulticastAToB(t *testing.T) {
	s := needPeer(t)
	g := &net.UDPAddr{IP: net.IPv4(239, 97, 1, 1)}
	args := []string{"-group", g.IP.String(), "-conns", "2", "-n", strconv.Itoa(crossN), "-idle", "10s"}
	s.helperOnPeer(t, "recv1", "recv", "", args...)
	s.helperOnPeer(t, "recv2", "recv", "", args...)
	local := s.listen(t, g)
	tx := s.listen(t, g, func(lc *rdmanet.ListenConfig) { lc.SendOnly = true })
	var res recvResult
	var wg sync.WaitGroup
	wg.Go(func() { res = receive(local, crossN, 10*time.Second) })
	require.NoError(t, send(tx, g, crossN, crossSize, crossGap))
	for _, name := range []string{"recv1", "recv2"} {
		r := s.waitPeer(t, name, 60*time.Second)
		requireAllGot(t, r.Output, r.Lines("RESULT"), 2, s.addr)
	}
	wg.Wait()
	require.Equal(t, recvResult{Got: crossN, From: s.addr.String()}, res, "the receiver on the sending host")
}

// TestMulticastBToA: one sender on b, three receivers on a.
func TestMulticastBToA(t *testing.T) {
	s := needPeer(t)
	g := &net.UDPAddr{IP: net.IPv4(239, 97, 1, 2)}
	rx := []*rdmanet.Conn{s.listen(t, g), s.listen(t, g), s.listen(t, g)}
	res := make([]recvResult, len(rx))
	var wg sync.WaitGroup
	for i, c := range rx {
		wg.Go(func() { res[i] = receive(c, crossN, 20*time.Second) })
	}
	s.helperOnPeer(t, "send", "send", "", "-group", g.IP.String(), "-n", strconv.Itoa(crossN),
		"-size", strconv.Itoa(crossSize), "-gap", crossGap.String())
	s.waitPeer(t, "send", 60*time.Second)
	wg.Wait()
	for i, r := range res {
		require.Equal(t, recvResult{Got: crossN, From: s.peer.String()}, r, "receiver %d on a", i)
	}
}

// TestUnicastRepliesAToB: a asks on a group, b's echo answers each request
// by UD unicast to the asking QP (an address handle to a's GID and QPN).
func TestUnicastRepliesAToB(t *testing.T) {
	s := needPeer(t)
	g := &net.UDPAddr{IP: net.IPv4(239, 97, 1, 3)}
	s.helperOnPeer(t, "echo", "echo", "", "-group", g.IP.String(), "-reply", "unicast")
	c := s.listen(t, g, func(lc *rdmanet.ListenConfig) { lc.SendOnly = true })
	for _, size := range []int{64, crossSize} {
		r := ping(c, g, 50, size, 5*time.Second)
		require.Equal(t, 50, r.Got, "%d B: answers (bad %d)", size, r.Bad)
		require.Equal(t, s.peer.String(), r.From, "answers' sender")
	}
	r, err := s.agent.Stop("echo")
	require.NoError(t, err)
	require.Contains(t, r.Output, "ECHOED 100", "the echo's count")
}

// TestUnicastRepliesBToA: the same the other way: b asks, an echo on a
// answers by unicast.
func TestUnicastRepliesBToA(t *testing.T) {
	s := needPeer(t)
	g := &net.UDPAddr{IP: net.IPv4(239, 97, 1, 4)}
	echo := s.listen(t, g)
	go echoLoop(echo, nil)
	s.helperOnPeer(t, "ping", "ping", "", "-group", g.IP.String(), "-n", "50", "-size", strconv.Itoa(crossSize))
	r := s.waitPeer(t, "ping", 120*time.Second)
	l := r.Lines("RESULT")
	require.Len(t, l, 1, r.Output)
	require.Equal(t, "50", field(l[0], "got"), r.Output)
	require.Equal(t, s.addr.String(), field(l[0], "from"), r.Output)
}

// echoLoop answers every datagram on c with the same bytes, to the sender
// (to nil) or to the group to, until c is closed.
func echoLoop(c *rdmanet.Conn, to net.Addr) {
	buf := make([]byte, 4096)
	for {
		k, from, err := c.ReadFromAddr(buf)
		if err != nil {
			return
		}
		dst := to
		if dst == nil {
			dst = &from
		}
		c.WriteTo(buf[:k], dst)
	}
}

// TestSoftwareBackendAndRXE: the software backend (pure Go RoCEv2 over UDP,
// in b's namespace sw, on a macvlan of b's NIC) and rxe on a, both ways,
// multicast and unicast answers.
func TestSoftwareBackendAndRXE(t *testing.T) {
	s := needPeer(t)
	soft := []string{"-backend", rdmanet.BackendSoftware, "-bind", s.softAddr.String()}
	t.Run("rxe-to-software", func(t *testing.T) {
		g := &net.UDPAddr{IP: net.IPv4(239, 97, 1, 5)}
		s.helperOnPeer(t, "soft-recv", "recv", s.softNS, append(soft, "-group", g.IP.String(),
			"-n", strconv.Itoa(crossN), "-idle", "10s")...)
		tx := s.listen(t, g, func(lc *rdmanet.ListenConfig) { lc.SendOnly = true })
		require.NoError(t, send(tx, g, crossN, crossSize, crossGap))
		r := s.waitPeer(t, "soft-recv", 60*time.Second)
		requireAllGot(t, r.Output, r.Lines("RESULT"), 1, s.addr)
	})
	t.Run("software-to-rxe", func(t *testing.T) {
		g := &net.UDPAddr{IP: net.IPv4(239, 97, 1, 6)}
		rx := s.listen(t, g)
		var res recvResult
		var wg sync.WaitGroup
		wg.Go(func() { res = receive(rx, crossN, 20*time.Second) })
		s.helperOnPeer(t, "soft-send", "send", s.softNS, append(soft, "-group", g.IP.String(),
			"-n", strconv.Itoa(crossN), "-size", strconv.Itoa(crossSize), "-gap", crossGap.String())...)
		s.waitPeer(t, "soft-send", 60*time.Second)
		wg.Wait()
		require.Equal(t, recvResult{Got: crossN, From: s.softAddr.String()}, res)
	})
	t.Run("software-answers-rxe", func(t *testing.T) {
		g := &net.UDPAddr{IP: net.IPv4(239, 97, 1, 7)}
		s.helperOnPeer(t, "soft-echo", "echo", s.softNS, append(soft, "-group", g.IP.String(), "-reply", "unicast")...)
		c := s.listen(t, g, func(lc *rdmanet.ListenConfig) { lc.SendOnly = true })
		r := ping(c, g, 50, crossSize, 5*time.Second)
		require.Equal(t, 50, r.Got, "answers (bad %d)", r.Bad)
		require.Equal(t, s.softAddr.String(), r.From)
	})
	t.Run("rxe-answers-software", func(t *testing.T) {
		g := &net.UDPAddr{IP: net.IPv4(239, 97, 1, 8)}
		echo := s.listen(t, g)
		go echoLoop(echo, nil)
		s.helperOnPeer(t, "soft-ping", "ping", s.softNS, append(soft, "-group", g.IP.String(), "-n", "50",
			"-size", strconv.Itoa(crossSize))...)
		r := s.waitPeer(t, "soft-ping", 120*time.Second)
		l := r.Lines("RESULT")
		require.Len(t, l, 1, r.Output)
		require.Equal(t, "50", field(l[0], "got"), r.Output)
		require.Equal(t, s.addr.String(), field(l[0], "from"), r.Output)
	})
}
