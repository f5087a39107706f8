//go:build linux

package rdmanet_test

import (
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/go-rdma/rdmanet/rdmanet"
	"github.com/stretchr/testify/require"
)

func TestListenCloseCyclesLeakNothing(t *testing.T) {
	cycles := 1000
	if testing.Short() || testDevice != "" {
		cycles = 100 // rdma_cm joins under the VM's emulated CPU are slow
	}
	g := newGroup()
	// Warm up once: lazy runtime and package state is not a leak.
	c := listen(t, g)
	c.Close()
	runtime.GC()
	fds := countFDs(t)
	gor := runtime.NumGoroutine()
	for i := 0; i < cycles; i++ {
		lc := testConfig()
		c, err := lc.ListenMulticast(t.Context(), "rdma", nil, g)
		require.NoError(t, err)
		if i%2 == 0 {
			// Close with a reader blocked.
			done := make(chan struct{})
			go func() { c.ReadFrom(make([]byte, 8)); close(done) }()
			runtime.Gosched()
			require.NoError(t, c.Close())
			<-done
		} else {
			require.NoError(t, c.Close())
		}
	}
	waitGoroutines(t, gor)
	require.Equal(t, fds, countFDs(t), "open fds after %d Listen/Close cycles", cycles)
}

// Not parallel: the heap bound is the process's, and the parallel tests'
// own allocations once took it past 8 MiB (8.9 MB).
func TestSlowReceiverDropsAndCounts(t *testing.T) {
	g := newGroup()
	rx := listen(t, g, func(lc *rdmanet.ListenConfig) { lc.RecvDepth = 64 })
	tx := listen(t, g)
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapInuse
	payload := make([]byte, 1024)
	sent := 20000
	if testDevice != "" {
		sent = 2000 // the VM's Soft-RoCE is slow: still 30x the ring
	}
	for i := 0; i < sent; i++ {
		_, err := tx.WriteTo(payload, g)
		require.NoError(t, err)
		if i%100 == 99 {
			// Let loopback's backlog reach the receiver's socket, so the
			// loss happens where the receiver can see it.
			time.Sleep(100 * time.Microsecond)
		}
	}
	// Drain what is left and count.
	got := 0
	buf := make([]byte, 2048)
	for {
		rx.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if _, _, err := rx.ReadFrom(buf); err != nil {
			break
		}
		got++
	}
	// UD drops are silent; the software backend learns the kernel's count
	// with the next datagram, as a NIC's counter would be read later.
	_, err := tx.WriteTo([]byte("marker"), g)
	require.NoError(t, err)
	mustRead(t, rx)
	st := rx.Stats()
	var dropped uint64
	for _, v := range st.Dropped {
		dropped += v
	}
	t.Logf("sent %d, received %d, dropped %v", sent, got, st.Dropped)
	require.Less(t, got, sent, "a receiver that never read cannot have kept everything")
	if testDevice == "" {
		// The software backend counts what the kernel dropped for it; on
		// rdma-core, rxe and NICs count UD drops per port, not per QP.
		require.Equal(t, uint64(sent), uint64(got)+dropped, "every datagram is received or counted as dropped")
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	require.Less(t, int64(ms.HeapInuse)-int64(before), int64(8<<20), "heap must not grow with the backlog")
}

func TestHostileDatagramsAreCountedDrops(t *testing.T) {
	t.Parallel()
	if testDevice != "" {
		t.Skip("software backend only: rxe counts its own drops")
	}
	g := newGroup()
	rx := listen(t, g)
	// A plain UDP socket on loopback throws garbage at the group's RoCEv2 port.
	u, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	defer u.Close()
	dst := &net.UDPAddr{IP: g.IP, Port: 4791}
	junk := [][]byte{
		{},
		{0x64},
		make([]byte, 11),
		append([]byte{0x64, 0x00, 0xff, 0xff, 0, 0xff, 0xff, 0xff, 0, 0, 0, 1}, make([]byte, 40)...),
		[]byte("definitely not an InfiniBand packet, just a UDP datagram"),
	}
	for _, j := range junk {
		_, err := u.WriteTo(j, dst)
		require.NoError(t, err)
	}
	expectNothing(t, rx, 200*time.Millisecond)
	var dropped uint64
	for _, v := range rx.Stats().Dropped {
		dropped += v
	}
	require.GreaterOrEqual(t, dropped, uint64(len(junk)), "drops: %v", rx.Stats().Dropped)
	// The conn still works.
	tx := listen(t, g)
	_, err = tx.WriteTo([]byte("fine"), g)
	require.NoError(t, err)
	b, _ := mustRead(t, rx)
	require.Equal(t, "fine", string(b))
}

func TestHotPathAllocations(t *testing.T) {
	g := newGroup()
	rx := listen(t, g)
	tx := listen(t, g)
	msg := make([]byte, 64)
	buf := make([]byte, 2048)
	allocs := testing.AllocsPerRun(500, func() {
		if _, err := tx.WriteTo(msg, g); err != nil {
			t.Fatal(err)
		}
		if _, _, err := rx.ReadFromAddr(buf); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs, "WriteTo + ReadFromAddr allocations per message")

	// To the group's own address (an *Addr, its MGID form) as well.
	ga, err := tx.GroupAddr(g)
	require.NoError(t, err)
	allocs = testing.AllocsPerRun(500, func() {
		if _, err := tx.WriteTo(msg, &ga); err != nil {
			t.Fatal(err)
		}
		if _, _, err := rx.ReadFromAddr(buf); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs, "WriteTo(GroupAddr) + ReadFromAddr allocations per message")
}

func TestManyBlockedReadersFewThreads(t *testing.T) {
	n := 1000
	if testing.Short() || testDevice != "" {
		n = 100 // each conn pins memory and joins through rdma_cm
	}
	conns := make([]*rdmanet.Conn, 0, n)
	for i := 0; i < n; i++ {
		lc := testConfig()
		lc.RecvDepth, lc.SendDepth = 8, 8
		// A group each: devices limit the QPs attached to one MGID (rxe: 56).
		c, err := lc.ListenMulticast(t.Context(), "rdma", nil, newGroup())
		require.NoError(t, err, "conn %d", i)
		conns = append(conns, c)
	}
	done := make(chan struct{}, n)
	for _, c := range conns {
		go func(c *rdmanet.Conn) { c.ReadFrom(make([]byte, 8)); done <- struct{}{} }(c)
	}
	time.Sleep(300 * time.Millisecond)
	threads := threadCount(t)
	limit := runtime.GOMAXPROCS(0) + 8
	for _, c := range conns {
		c.Close()
	}
	for i := 0; i < n; i++ {
		<-done
	}
	require.LessOrEqual(t, threads, limit, "OS threads with %d blocked readers", n)
}
