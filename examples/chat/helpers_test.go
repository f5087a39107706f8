package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-rdma/rdmanet/internal/testenv"
	"github.com/go-rdma/rdmanet/rdmanet"
	"github.com/stretchr/testify/require"
)

const (
	testWait = 10 * time.Second
	tick     = 10 * time.Millisecond
	// testHeartbeat keeps timeouts short: a silent member is gone after
	// 350ms.
	testHeartbeat = 100 * time.Millisecond
)

var osPipe = os.Pipe

// Tests run on the software backend over loopback, unless testenv.Device
// names an RDMA device (the rxe VM sets it): then on rdma-core bound to
// testenv.Addr, as rdmanet's own tests do.
var (
	testDevice = testenv.Device()
	testAddr   = testenv.Addr()
)

func testListenConfig() rdmanet.ListenConfig {
	if testDevice != "" {
		return rdmanet.ListenConfig{Backend: rdmanet.BackendRDMACore, LocalAddr: net.ParseIP(testAddr), Device: testDevice}
	}
	return rdmanet.ListenConfig{Backend: rdmanet.BackendSoftware}
}

// groupSeq hands each test its own group, so parallel tests (and other
// packages' tests, which use 239.77.x.x) never share one.
var groupSeq atomic.Uint32

func newGroup() *net.UDPAddr {
	n := groupSeq.Add(1) + uint32(os.Getpid()%200)*256
	return &net.UDPAddr{IP: net.IPv4(239, 78, byte(n>>8), byte(n))}
}

// lines collects what a display prints and waits for lines.
type lines struct {
	mu    sync.Mutex
	all   []string
	added chan struct{} // closed and replaced on every line
}

func newLines() *lines { return &lines{added: make(chan struct{})} }

func (l *lines) add(s string) {
	l.mu.Lock()
	l.all = append(l.all, s)
	close(l.added)
	l.added = make(chan struct{})
	l.mu.Unlock()
}

func (l *lines) snapshot() ([]string, chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.all...), l.added
}

// waitFor waits for a line that match accepts and returns its index.
func (l *lines) waitFor(t testing.TB, what string, match func(string) bool) int {
	t.Helper()
	deadline := time.After(testWait)
	for {
		all, added := l.snapshot()
		for i, s := range all {
			if match(s) {
				return i
			}
		}
		select {
		case <-added:
		case <-deadline:
			t.Fatalf("no line %s within %v; got:\n%s", what, testWait, strings.Join(all, "\n"))
		}
	}
}

// waitLine waits for the exact line s.
func (l *lines) waitLine(t testing.TB, s string) int {
	t.Helper()
	return l.waitFor(t, fmt.Sprintf("%q", s), func(x string) bool { return x == s })
}

func (l *lines) count(s string) int {
	all, _ := l.snapshot()
	n := 0
	for _, x := range all {
		if x == s {
			n++
		}
	}
	return n
}

// testDisplay is a pipe display whose output goes to lines.
type testDisplay struct {
	*pipeDisplay
	out *lines
}

func (d *testDisplay) Println(s string) { d.out.add(s) }

// client is one in-process chat.
type client struct {
	*Chat
	nick   string
	in     *io.PipeWriter
	out    *lines
	cancel context.CancelFunc
	done   chan error
}

// startClient opens and runs a chat and waits for it to join.
func startClient(t *testing.T, nick string, group *net.UDPAddr, mods ...func(*Options)) *client {
	t.Helper()
	opt := Options{Nick: nick, Group: group, Listen: testListenConfig(), Heartbeat: testHeartbeat}
	opt.Listen.DisableLoopback = true
	for _, m := range mods {
		m(&opt)
	}
	pr, pw := io.Pipe()
	out := newLines()
	disp := &testDisplay{pipeDisplay: newPipe(pr, io.Discard), out: out}
	ctx, cancel := context.WithCancel(context.Background())
	c, err := Open(ctx, opt, disp)
	if err != nil {
		cancel()
		require.NoError(t, err)
	}
	if testDevice != "" {
		require.Equal(t, testDevice, c.conn.Backend().Device)
	}
	cl := &client{Chat: c, nick: nick, in: pw, out: out, cancel: cancel, done: make(chan error, 1)}
	go func() { cl.done <- c.Run(ctx) }()
	out.waitFor(t, "* joined", func(s string) bool { return strings.HasPrefix(s, "* joined "+group.IP.String()+" as "+nick) })
	t.Cleanup(func() { cl.stop(t) })
	return cl
}

// say types a line.
func (c *client) say(t testing.TB, line string) {
	t.Helper()
	_, err := io.WriteString(c.in, line+"\n")
	require.NoError(t, err)
}

// stop ends the chat (as Ctrl-C would) and waits for it.
func (c *client) stop(t testing.TB) {
	t.Helper()
	c.cancel()
	c.in.Close()
	select {
	case err := <-c.done:
		require.NoError(t, err)
		c.done <- nil // stop is idempotent
	case <-time.After(testWait):
		t.Fatalf("%s: Run did not return", c.nick)
	}
}
