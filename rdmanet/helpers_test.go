//go:build linux

package rdmanet_test

import (
	"context"
	"net"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/testenv"
	"github.com/go-rdma/rdmanet/rdmanet"
)

// Tests run on the software backend over loopback unless
// testenv.Device names a device (the rxe VM sets it): then they run on
// rdma-core bound to testenv.Addr, and a missing device fails them.
var (
	testDevice = testenv.Device()
	testAddr   = testenv.Addr()
)

func testConfig() rdmanet.ListenConfig {
	if testDevice != "" {
		return rdmanet.ListenConfig{Backend: rdmanet.BackendRDMACore, LocalAddr: net.ParseIP(testAddr), Device: testDevice}
	}
	return rdmanet.ListenConfig{Backend: rdmanet.BackendSoftware}
}

// groupSeq hands out a fresh group per test, so parallel tests never share
// one.
var groupSeq atomic.Uint32

func newGroup() *net.UDPAddr {
	n := groupSeq.Add(1) + uint32(os.Getpid()%200)*256
	return &net.UDPAddr{IP: net.IPv4(239, 77, byte(n>>8), byte(n)), Port: 4791}
}

func listen(t testing.TB, group *net.UDPAddr, mod ...func(*rdmanet.ListenConfig)) *rdmanet.Conn {
	t.Helper()
	lc := testConfig()
	for _, m := range mod {
		m(&lc)
	}
	c, err := lc.ListenMulticast(context.Background(), "rdma", nil, group)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	if testDevice != "" {
		require.Equal(t, testDevice, c.Backend().Device)
	}
	return c
}

// read reads one datagram with a timeout.
func read(t testing.TB, c *rdmanet.Conn, d time.Duration) ([]byte, *rdmanet.Addr, error) {
	t.Helper()
	buf := make([]byte, 8192)
	c.SetReadDeadline(time.Now().Add(d))
	defer c.SetReadDeadline(time.Time{})
	n, from, err := c.ReadFrom(buf)
	if err != nil {
		return nil, nil, err
	}
	return buf[:n], from.(*rdmanet.Addr), nil
}

func mustRead(t testing.TB, c *rdmanet.Conn) ([]byte, *rdmanet.Addr) {
	t.Helper()
	b, from, err := read(t, c, 5*time.Second)
	require.NoError(t, err)
	return b, from
}

// expectNothing asserts that nothing arrives within d.
func expectNothing(t testing.TB, c *rdmanet.Conn, d time.Duration) {
	t.Helper()
	b, from, err := read(t, c, d)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "got %q from %v, want nothing", b, from)
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

func countFDs(t testing.TB) int {
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(ents)
}

// waitGoroutines waits for the goroutine count to drop to at most n.
func waitGoroutines(t testing.TB, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > n {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("goroutines: got %d, want <= %d\n%s", g, n, firstLines(string(buf), 60))
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}
