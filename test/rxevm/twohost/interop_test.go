//go:build linux

package twohost

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-rdma/rdmanet/rdmanet"
	"github.com/go-rdma/rdmanet/test/rxevm/peer"
	"github.com/stretchr/testify/require"
)

// TestRdmanetSendsToMckey: rdmanet on a sends to rdma-core's mckey
// receiving on b.
func TestRdmanetSendsToMckey(t *testing.T) {
	s := needPeer(t)
	const n, size = 20, 100
	g := &net.UDPAddr{IP: net.IPv4(239, 97, 2, 1)}
	_, err := s.agent.Start(peer.StartRequest{Name: "mckey", Argv: []string{"stdbuf", "-oL", "mckey",
		"-m", g.IP.String(), "-b", s.peer.String(), "-C", strconv.Itoa(n), "-S", strconv.Itoa(size)}})
	require.NoError(t, err)
	t.Cleanup(func() { s.agent.Stop("mckey") })
	r, err := s.agent.Wait("mckey", "receiving data transfers", 30*time.Second)
	require.NoError(t, err)
	require.True(t, r.Matched, "mckey on b:\n%s", r.Output)
	tx := s.listen(t, g, func(lc *rdmanet.ListenConfig) { lc.SendOnly = true })
	msg := bytes.Repeat([]byte("m"), size)
	for i := 0; i < n; i++ {
		_, err := tx.WriteTo(msg, g)
		require.NoError(t, err)
		time.Sleep(5 * time.Millisecond)
	}
	r = s.waitPeer(t, "mckey", 30*time.Second)
	require.Contains(t, r.Output, "data transfers complete", "mckey on b")
}

// TestMckeySendsToRdmanet: mckey on b sends, rdmanet on a receives.
func TestMckeySendsToRdmanet(t *testing.T) {
	s := needPeer(t)
	const n, size = 20, 100
	g := &net.UDPAddr{IP: net.IPv4(239, 97, 2, 2)}
	rx := s.listen(t, g)
	_, err := s.agent.Start(peer.StartRequest{Name: "mckey", Argv: []string{"stdbuf", "-oL", "mckey",
		"-m", g.IP.String(), "-b", s.peer.String(), "-s", "-C", strconv.Itoa(n), "-S", strconv.Itoa(size)}})
	require.NoError(t, err)
	t.Cleanup(func() { s.agent.Stop("mckey") })
	buf := make([]byte, 4096)
	for i := 0; i < n; i++ {
		rx.SetReadDeadline(time.Now().Add(30 * time.Second))
		k, from, err := rx.ReadFromAddr(buf)
		if err != nil {
			r, _ := s.agent.Wait("mckey", "", 0)
			t.Fatalf("message %d of %d from mckey: %v; mckey said:\n%s", i+1, n, err, r.Output)
		}
		require.Equal(t, size, k, "message size")
		require.Equal(t, s.peer.String(), from.IP().String(), "sender")
	}
	r := s.waitPeer(t, "mckey", 30*time.Second)
	require.Contains(t, r.Output, "data transfers complete", "mckey on b")
}

// lineWatcher collects a local process's output lines.
type lineWatcher struct {
	mu    sync.Mutex
	lines []string
}

func (w *lineWatcher) wait(t *testing.T, what string, ok func(string) bool, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		w.mu.Lock()
		for _, l := range w.lines {
			if ok(l) {
				w.mu.Unlock()
				return
			}
		}
		w.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	t.Fatalf("chat on a: no %s within %v; output:\n%s", what, d, strings.Join(w.lines, "\n"))
}

// TestChatAcrossHosts: the chat example, alice on a and bob on b, each on
// its host's rxe0 (rdma-core backend): joins are seen and lines cross both
// ways.
func TestChatAcrossHosts(t *testing.T) {
	s := needPeer(t)
	const group = "239.97.2.3"
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	common := []string{"-group", group, "-backend", rdmanet.BackendRDMACore, "-heartbeat", "300ms"}
	_, err := s.agent.Start(peer.StartRequest{Name: "bob", Stdin: true,
		Argv: append([]string{"chat", "-nick", "bob", "-bind", s.peer.String()}, common...)})
	require.NoError(t, err)
	t.Cleanup(func() { s.agent.Stop("bob") })
	r, err := s.agent.Wait("bob", "* joined "+group+" as bob: rdma-core backend", 30*time.Second)
	require.NoError(t, err)
	require.True(t, r.Matched, "bob on b:\n%s", r.Output)

	alice := exec.CommandContext(ctx, "chat", append([]string{"-nick", "alice", "-bind", s.addr.String()}, common...)...)
	in, err := alice.StdinPipe()
	require.NoError(t, err)
	out, err := alice.StdoutPipe()
	require.NoError(t, err)
	alice.Stderr = alice.Stdout
	require.NoError(t, alice.Start())
	var w lineWatcher
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			w.mu.Lock()
			w.lines = append(w.lines, sc.Text())
			w.mu.Unlock()
		}
	}()
	t.Cleanup(func() { alice.Process.Kill(); <-done; alice.Wait() })

	w.wait(t, "bob's presence", func(l string) bool { return l == "* bob is here" || l == "* bob joined" }, 30*time.Second)
	r, err = s.agent.Wait("bob", "* alice joined", 30*time.Second)
	require.NoError(t, err)
	require.True(t, r.Matched, "bob on b:\n%s", r.Output)

	_, err = in.Write([]byte("hello from a\n"))
	require.NoError(t, err)
	r, err = s.agent.Wait("bob", "<alice> hello from a", 30*time.Second)
	require.NoError(t, err)
	require.True(t, r.Matched, "bob on b:\n%s", r.Output)

	require.NoError(t, s.agent.Feed("bob", "hello from b\n", false))
	w.wait(t, "bob's line", func(l string) bool { return l == "<bob> hello from b" }, 30*time.Second)

	require.NoError(t, s.agent.Feed("bob", "/quit\n", false))
	w.wait(t, "bob leaving", func(l string) bool { return strings.HasPrefix(l, "* bob left") }, 30*time.Second)
}
