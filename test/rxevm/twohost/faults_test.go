//go:build linux

package twohost

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-rdma/rdmanet/rdmanet"
	"github.com/stretchr/testify/require"
)

// peerCounters reads rxe's port counters on the peer
// (/sys/class/infiniband/DEV/ports/1/hw_counters).
func (s *site) peerCounters(t *testing.T, names ...string) map[string]uint64 {
	t.Helper()
	dir := filepath.Join("/sys/class/infiniband", s.device, "ports/1/hw_counters")
	args := []string{"sh", "-c", "cd " + dir + " && for f in " + strings.Join(names, " ") + "; do echo $f=$(cat $f); done"}
	r, err := s.agent.Run("counters", 10*time.Second, args...)
	require.NoError(t, err)
	out := map[string]uint64{}
	for _, n := range names {
		l := r.Lines(n + "=")
		require.Len(t, l, 1, "counter %s on the peer:\n%s", n, r.Output)
		v, err := strconv.ParseUint(strings.TrimSpace(field(l[0], n)), 10, 64)
		require.NoError(t, err, "counter %s: %q", n, l[0])
		out[n] = v
	}
	return out
}

// TestLossFlood: a floods a receiver on b that does not read. The
// receiver's ring (512 receives) holds what it can and rxe drops the rest:
// b's rxe counts every packet it got (rcvd_pkts) and the few it could
// place (rdma_recvs), and the receiver drains exactly what was placed.
func TestLossFlood(t *testing.T) {
	s := needPeer(t)
	const n, size, depth = 50016, 64, 512 // n: 1563 batches of 32
	g := &net.UDPAddr{IP: net.IPv4(239, 97, 3, 1)}
	s.helperOnPeer(t, "sink", "sink", "", "-group", g.IP.String(), "-depth", strconv.Itoa(depth), "-idle", "2s")
	names := []string{"rcvd_pkts", "rdma_recvs"}
	before := s.peerCounters(t, names...)

	tx := s.listen(t, g, func(lc *rdmanet.ListenConfig) { lc.SendOnly = true })
	ms := make([]rdmanet.Message, 32)
	dst, err := tx.GroupAddr(g)
	require.NoError(t, err)
	for i := range ms {
		ms[i] = rdmanet.Message{Buffer: make([]byte, size), Addr: dst}
	}
	for seq := 0; seq < n; seq += len(ms) {
		for i := range ms {
			message(ms[i].Buffer, uint64(seq+i))
		}
		k, err := tx.WriteBatch(ms)
		require.NoError(t, err)
		require.Equal(t, len(ms), k)
	}
	require.EqualValues(t, n, tx.Stats().Sent)
	time.Sleep(time.Second) // the last packets cross
	after := s.peerCounters(t, names...)

	require.NoError(t, s.agent.Feed("sink", "drain\n", true))
	r := s.waitPeer(t, "sink", 60*time.Second)
	l := r.Lines("RESULT")
	require.Len(t, l, 1, r.Output)
	got, err := strconv.Atoi(field(l[0], "got"))
	require.NoError(t, err, l[0])
	rcvd := after["rcvd_pkts"] - before["rcvd_pkts"]
	placed := after["rdma_recvs"] - before["rdma_recvs"]
	t.Logf("sent %d, peer's rxe0: rcvd_pkts +%d, rdma_recvs +%d; the receiver drained %d", n, rcvd, placed, got)
	require.Greater(t, got, 0, "the receiver drained nothing:\n%s", r.Output)
	require.LessOrEqual(t, got, depth, "more than the ring holds")
	require.EqualValues(t, placed, got, "rdma_recvs against what the receiver read")
	require.Greater(t, rcvd, uint64(10*depth), "the flood reached b's rxe0")
	lost := rcvd - placed

	stats := r.Lines("STATS")
	require.Len(t, stats, 1, r.Output)
	dropped := droppedTotal(t, strings.TrimPrefix(stats[0], "STATS "))
	require.NotZero(t, dropped, "rxe dropped %d of %d datagrams for want of a receive, but Stats().Dropped is empty (%s)", lost, rcvd, stats[0])
	require.GreaterOrEqual(t, dropped, lost*9/10, "Stats().Dropped against rxe's count of %d lost", lost)
	require.LessOrEqual(t, dropped, uint64(n), "Stats().Dropped counts more than was sent")
}

// TestLossFloodSoftware: the same flood at a receiver on the software
// backend (b, namespace sw) that does not read. Its socket buffer plays the
// NIC's buffer, and what overflows it is counted in Stats().Dropped: the
// drained and the dropped add up to what was sent (less what the link
// itself lost, which nobody on b can see).
func TestLossFloodSoftware(t *testing.T) {
	s := needPeer(t)
	const n, size = 50016, 64
	g := &net.UDPAddr{IP: net.IPv4(239, 97, 3, 4)}
	s.helperOnPeer(t, "soft-sink", "sink", s.softNS, "-backend", rdmanet.BackendSoftware,
		"-bind", s.softAddr.String(), "-group", g.IP.String(), "-idle", "2s")
	tx := s.listen(t, g, func(lc *rdmanet.ListenConfig) { lc.SendOnly = true })
	dst, err := tx.GroupAddr(g)
	require.NoError(t, err)
	ms := make([]rdmanet.Message, 32)
	for i := range ms {
		ms[i] = rdmanet.Message{Buffer: make([]byte, size), Addr: dst}
	}
	for seq := 0; seq < n; seq += len(ms) {
		for i := range ms {
			message(ms[i].Buffer, uint64(seq+i))
		}
		_, err := tx.WriteBatch(ms)
		require.NoError(t, err)
	}
	time.Sleep(time.Second)
	require.NoError(t, s.agent.Feed("soft-sink", "drain\n", true))
	r := s.waitPeer(t, "soft-sink", 60*time.Second)
	l := r.Lines("RESULT")
	require.Len(t, l, 1, r.Output)
	got, err := strconv.ParseUint(field(l[0], "got"), 10, 64)
	require.NoError(t, err, l[0])
	stats := r.Lines("STATS")
	require.Len(t, stats, 1, r.Output)
	dropped := droppedTotal(t, strings.TrimPrefix(stats[0], "STATS "))
	t.Logf("sent %d; the software receiver drained %d, Stats().Dropped %d (%s)", n, got, dropped, stats[0])
	require.Greater(t, got, uint64(0), "drained")
	require.Less(t, got, uint64(n), "the flood overflowed nothing: no loss to count")
	require.LessOrEqual(t, got+dropped, uint64(n), "drained + dropped against sent")
	require.GreaterOrEqual(t, got+dropped, uint64(n)*9/10, "drained + dropped against sent: loss not counted")
}

// droppedTotal sums Stats().Dropped in a Stats JSON object.
func droppedTotal(t *testing.T, js string) uint64 {
	t.Helper()
	var st rdmanet.Stats
	require.NoError(t, jsonUnmarshal(js, &st), js)
	var sum uint64
	for _, v := range st.Dropped {
		sum += v
	}
	return sum
}

// setLink runs `ip link set DEV up|down` here.
func setLink(t *testing.T, dev, state string) {
	t.Helper()
	out, err := exec.Command("ip", "link", "set", dev, state).CombinedOutput()
	require.NoError(t, err, "ip link set %s %s: %s", dev, state, out)
}

// waitPortActive waits until the device's port 1 is ACTIVE again.
func waitPortActive(t *testing.T, dev string, d time.Duration) {
	t.Helper()
	path := filepath.Join("/sys/class/infiniband", dev, "ports/1/state")
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(path)
		if strings.Contains(string(b), "ACTIVE") {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	b, _ := os.ReadFile(path)
	t.Fatalf("%s port 1 not ACTIVE %v after link-up: %s", dev, d, b)
}

// TestLinkFlap: a's link goes down for 3 s and comes back under a conn
// that was asking b's echo and a receiving conn. A conn opened after the
// flap must work at once (the link is back), and the receiver that lived
// through it gets b's multicast again. The asking conn that lived through
// it must get answers again within 1 s of link-up, and while the link was
// down its WriteTo failed with ErrLinkDown.
func TestLinkFlap(t *testing.T) {
	s := needPeer(t)
	g := &net.UDPAddr{IP: net.IPv4(239, 97, 3, 2)}
	s.helperOnPeer(t, "echo", "echo", "", "-group", g.IP.String(), "-reply", "unicast")
	old := s.listen(t, g, func(lc *rdmanet.ListenConfig) { lc.SendOnly = true })
	r := ping(old, g, 10, 64, 5*time.Second)
	require.Equal(t, 10, r.Got, "answers before the flap")
	// A receiver on a that lives through the flap too, for b's multicast.
	g2 := &net.UDPAddr{IP: net.IPv4(239, 97, 3, 3)}
	oldRx := s.listen(t, g2)

	setLink(t, s.netdev, "down")
	t.Cleanup(func() { exec.Command("ip", "link", "set", s.netdev, "up").Run() })
	time.Sleep(3 * time.Second)
	down := old.Stats()
	_, errDown := old.WriteTo(make([]byte, 64), g)
	setLink(t, s.netdev, "up")
	up := time.Now()
	waitPortActive(t, s.device, 10*time.Second)
	t.Logf("port ACTIVE %v after link-up; a WriteTo while down returned %v", time.Since(up).Round(time.Millisecond), errDown)
	require.ErrorIs(t, errDown, rdmanet.ErrLinkDown, "a WriteTo with the link down")

	// The old conn: ask until an answer comes, for up to 5 s after link-up.
	var recovered time.Duration
	var lastErr error
	for time.Since(up) < 5*time.Second {
		r := ping(old, g, 1, 64, 200*time.Millisecond)
		if r.Got == 1 {
			recovered = time.Since(up)
			break
		}
		_, lastErr = old.WriteTo(make([]byte, 64), g)
	}

	fresh := s.listen(t, g, func(lc *rdmanet.ListenConfig) { lc.SendOnly = true })
	r = ping(fresh, g, 10, 64, 5*time.Second)
	require.Equal(t, 10, r.Got, "a conn opened after the flap: answers")

	// b sends to the receiver that lived through the flap.
	const n = 20
	var rx recvResult
	var wg sync.WaitGroup
	wg.Go(func() { rx = receive(oldRx, n, 5*time.Second) })
	s.helperOnPeer(t, "send", "send", "", "-group", g2.IP.String(), "-n", strconv.Itoa(n), "-gap", "5ms")
	s.waitPeer(t, "send", 30*time.Second)
	wg.Wait()
	require.Equal(t, recvResult{Got: n, From: s.peer.String()}, rx, "the receiver on a that lived through the flap, from b")

	st := old.Stats()
	report := fmt.Sprintf("old conn: Sent %d -> %d, SendErrors %d -> %d, last WriteTo error %v",
		down.Sent, st.Sent, down.SendErrors, st.SendErrors, lastErr)
	require.NotZero(t, recovered, "the conn that lived through the flap got no answer within 5 s of link-up; %s", report)
	t.Logf("the old conn answered again %v after link-up; %s", recovered.Round(time.Millisecond), report)
	require.Less(t, recovered, time.Second, "recovery after link-up")
	r = ping(old, g, 10, 64, 5*time.Second)
	require.Equal(t, 10, r.Got, "the old conn after recovery")
}
