//go:build linux

package rdmanet_test

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// What one conn costs, for the docs: fds, goroutines, Go heap, and the
// memory mapped for its rings (resident once touched), measured over
// conns each joined to a group and to a second one with JoinGroup.
func TestPerConnCost(t *testing.T) {
	const n = 8
	warm := listen(t, newGroup()) // lazy package state is not a conn's
	warm.Close()
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	fds, gor, maps, rss := countFDs(t), runtime.NumGoroutine(), mappedKiB(t), residentKiB(t)
	conns := make([]*rdmanet.Conn, n)
	for i := range conns {
		conns[i] = listen(t, newGroup())
		require.NoError(t, conns[i].JoinGroup(nil, newGroup()))
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	per := func(a, b int) float64 { return float64(b-a) / n }
	dFD, dGor := per(fds, countFDs(t)), per(gor, runtime.NumGoroutine())
	dMap, dRSS := per(maps, mappedKiB(t)), per(rss, residentKiB(t))
	dHeap := float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / n / 1024
	t.Logf("per conn (%s, MTU %d, two groups): %.1f fds, %.1f goroutines, %.0f KiB mapped, %.0f KiB resident, %.0f KiB Go heap",
		conns[0].Backend().Name, conns[0].MTU(), dFD, dGor, dMap, dRSS, dHeap)
	// Bounds that catch a leak or a thread per conn, and on the software
	// backend an fd more than the 4 it holds (2 sockets, the receive CQ's
	// epoll set and the unicast watch's; TestConnFds lists them).
	maxFD := 16.0
	if conns[0].Backend().Name == rdmanet.BackendSoftware {
		maxFD = 4
	}
	require.LessOrEqual(t, dFD, maxFD, "fds per conn")
	require.LessOrEqual(t, dGor, 2.0, "goroutines per conn")
	for _, c := range conns {
		require.NoError(t, c.Close())
	}
}

// mappedKiB is the process's virtual size (VmSize), residentKiB its RSS.
func mappedKiB(t testing.TB) int   { return procStatusKiB(t, "VmSize:") }
func residentKiB(t testing.TB) int { return procStatusKiB(t, "VmRSS:") }

func procStatusKiB(t testing.TB, field string) int {
	b, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for _, l := range strings.Split(string(b), "\n") {
		if f, ok := strings.CutPrefix(l, field); ok {
			v, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(f), " kB"))
			require.NoError(t, err)
			return v
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}
