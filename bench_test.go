//go:build linux

// Benchmarks of rdmanet beside what a Go program would otherwise use for
// multicast: net.UDPConn, and golang.org/x/net/ipv4's batch I/O. Each
// baseline runs in the same process, on the same loopback interface, in
// the same run. Run (as root in a network namespace of its own):
//
//	unshare -n sh -c 'ip link set lo up && go test -run "^$" -bench "Throughput|PingPong|WriteTo" -benchtime 1s -count 5 . | tee bench.txt'
//	benchstat bench.txt
//
// Throughput: one sender floods, one receiver reads; msgs/s is what the
// receiver got per second, drops what it missed. Ping-pong: A sends to
// group 1, B answers on group 2; p50/p99 are half round trips, by the
// nearest-rank method (as `rdmanet perf`).
//
// The endpoints, loops and tallies are internal/perf's, as `rdmanet
// perf` runs them. The baselines get what a Go program gets at its best:
// every UDP receiver asks for the same SO_RCVBUF as the software
// backend's sockets (perf.SocketBuffer; the kernel caps both at
// net.core.rmem_max, and
// the run prints what each was granted), and the UDP senders come both
// unconnected (WriteToUDP) and connected (net.DialUDP + Write, what most
// Go multicast senders do: udp-connected). rdmanet's senders come
// send-only (rdmanet) and as a plain full-member conn with loopback on
// (rdmanet-member, what a newcomer writes: it also receives its own
// datagrams).
package bench_test

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-rdma/rdmanet/internal/perf"
	"github.com/go-rdma/rdmanet/internal/testenv"
	"github.com/go-rdma/rdmanet/internal/verbs/rdmacore"
	"github.com/go-rdma/rdmanet/rdmanet"
)

// TestMain prints, before a benchmark run, the receive buffers the kernel
// granted each side, as a benchstat configuration line.
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" {
		fmt.Println(rcvbufLine())
	}
	os.Exit(m.Run())
}

// rcvbufLine reports SO_RCVBUF as getsockopt gives it (twice what was
// granted: the kernel doubles the request for its overhead) for a UDP
// receiver and for a software-backend receiver (twice its ReadBuffer,
// the smallest of its sockets' grants), beside what each asked and
// net.core.rmem_max, which caps it.
func rcvbufLine() string {
	rmem := "?"
	if b, err := os.ReadFile("/proc/sys/net/core/rmem_max"); err == nil {
		rmem = strings.TrimSpace(string(b))
	}
	udp := "?"
	if lo, err := net.InterfaceByName("lo"); err != nil {
		udp = err.Error()
	} else if rx, err := perf.ListenUDP(lo, nextGroup(), perf.SocketBuffer); err != nil {
		udp = err.Error()
	} else {
		if n, err := rx.RcvBuf(); err == nil {
			udp = strconv.Itoa(n)
		}
		rx.Close()
	}
	rdma := "?"
	lc := benchConfig()
	if c, err := lc.ListenMulticast(context.Background(), "rdma", nil, nextGroup()); err == nil {
		if lc.Backend == rdmanet.BackendSoftware {
			// ReadBuffer is the grant; getsockopt, as for udp=, reports
			// twice it.
			rdma = strconv.Itoa(2 * c.ReadBuffer())
		} else {
			rdma = "rdma-core(ring)"
		}
		c.Close()
	}
	return fmt.Sprintf("rcvbuf: asked=%d rmem_max=%s udp=%s rdmanet=%s", perf.SocketBuffer, rmem, udp, rdma)
}

type size struct {
	name string
	n    int
}

var (
	sizesOnce sync.Once
	sizeList  []size
)

// sizes are 64 B, 1 KiB and the path MTU (4096 on loopback, 1024 on rxe
// with a 1500-byte netdev MTU, where it equals 1 KiB and is left out).
func sizes(tb testing.TB) []size {
	sizesOnce.Do(func() {
		sizeList = []size{{"64B", 64}, {"1KiB", 1024}}
		e := newRDMA(tb, nextGroup(), true, 0)
		if mtu := e.MTU(); mtu > 1024 {
			sizeList = append(sizeList, size{fmt.Sprintf("MTU%d", mtu), mtu})
		}
		e.Close()
	})
	return sizeList
}

var groupN atomic.Uint32

func nextGroup() *net.UDPAddr {
	n := groupN.Add(1) + uint32(os.Getpid()%100)*200
	return &net.UDPAddr{IP: net.IPv4(239, 88, byte(n>>8), byte(n)), Port: 30000 + int(n%20000)}
}

// ---- rdmanet ----

// benchConfig is the software backend on loopback, or, in the Soft-RoCE VM
// (testenv.Device and Addr set), rdma-core on that
// device, to set beside the harness's ib_send_bw run.
func benchConfig() rdmanet.ListenConfig {
	if dev := testenv.Device(); dev != "" {
		// A UD QP's receive ring is all the buffering it has.
		return rdmanet.ListenConfig{Backend: rdmanet.BackendRDMACore, Device: dev, LocalAddr: net.ParseIP(testenv.Addr()), RecvDepth: 2048}
	}
	return rdmanet.ListenConfig{Backend: rdmanet.BackendSoftware}
}

// newRDMA is a conn on group with loopback off: send-only, or a receiver
// with the given spin window.
func newRDMA(tb testing.TB, group *net.UDPAddr, sendOnly bool, spin time.Duration) *perf.RDMA {
	lc := benchConfig()
	// The software backend keeps its default ring: the socket buffer does
	// the buffering there, as for the UDP baseline.
	lc.SendOnly, lc.DisableLoopback, lc.SendDepth, lc.Spin = sendOnly, true, 256, spin
	return listenRDMA(tb, lc, group)
}

// newMember is the sender a newcomer writes: a conn with the default
// options (full member, loopback on), so it also receives what it sends.
func newMember(tb testing.TB, group *net.UDPAddr) *perf.RDMA {
	return listenRDMA(tb, benchConfig(), group)
}

func listenRDMA(tb testing.TB, lc rdmanet.ListenConfig, group *net.UDPAddr) *perf.RDMA {
	e, err := perf.ListenRDMA(lc, nil, group)
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

// ---- net.UDPConn and x/net/ipv4 ----

func loopback(tb testing.TB) *net.Interface {
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		tb.Fatal(err)
	}
	return lo
}

// newUDP is a net.ListenMulticastUDP receiver on lo with
// perf.SocketBuffer, and a sender from 127.0.0.1 with IP_MULTICAST_IF lo
// and loopback on: unconnected (WriteToUDP), or connected to the group
// (net.DialUDP + Write).
func newUDP(tb testing.TB, group *net.UDPAddr, connected bool) (tx, rx *perf.UDP) {
	lo := loopback(tb)
	rx, err := perf.ListenUDP(lo, group, perf.SocketBuffer)
	if err != nil {
		tb.Fatal(err)
	}
	if tx, err = perf.DialUDP(lo, nil, group, connected); err != nil {
		rx.Close()
		tb.Fatal(err)
	}
	return tx, rx
}

// ---- throughput ----

// throughput floods from tx (perf.Flood, batches of 32 with batch, else
// one at a time) and times b.N receives on rx (perf.Receiver, ReadBatch
// of up to 32 with batch).
func throughput(b *testing.B, tx, rx perf.Endpoint, size int, batch bool) {
	k := 1
	if batch {
		k = 32
	}
	var sent atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	flood := perf.Flood{Size: size, Batch: k, Stop: stop}
	wg.Go(func() { flood.Run(tx, &sent) })
	// Warm up: the flow is running before the clock starts.
	recv := &perf.Receiver{Size: 4096, Batch: k, Limit: 1, Quiet: time.Second}
	var warm perf.RxTally
	if err := recv.Run(rx, &warm); err != nil || warm.Received == 0 {
		b.Fatalf("warm-up: %d received (%v)", warm.Received, err)
	}
	recv.Limit = uint64(b.N)
	var tl perf.RxTally
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	s0 := sent.Load()
	c0 := rdmacore.Crossings()
	err := recv.Run(rx, &tl)
	el := time.Since(start)
	b.StopTimer()
	s1 := sent.Load()
	if c1 := rdmacore.Crossings(); c1 > c0 {
		// rdma-core only: sender and receiver together, per message sent.
		b.ReportMetric(float64(c1-c0)/float64(s1-s0), "cgo/msg")
	}
	close(stop)
	tx.Close()
	rx.Close()
	wg.Wait()
	if err != nil {
		b.Fatal(err)
	}
	if tl.Received < uint64(b.N) {
		b.Fatalf("received %d of %d: nothing came for %v", tl.Received, b.N, recv.Quiet)
	}
	b.ReportMetric(perf.Rate(tl.Received, el), "msgs/s")
	b.ReportMetric(perf.LossPct(s1-s0, tl.Received), "drop%")
}

func BenchmarkThroughput(b *testing.B) {
	for _, sz := range sizes(b) {
		b.Run("rdmanet/"+sz.name, func(b *testing.B) {
			g := nextGroup()
			rx := newRDMA(b, g, false, 0)
			tx := newRDMA(b, g, true, 0)
			throughput(b, tx, rx, sz.n, false)
		})
		b.Run("rdmanet-member/"+sz.name, func(b *testing.B) {
			g := nextGroup()
			rx := newRDMA(b, g, false, 0)
			tx := newMember(b, g)
			throughput(b, tx, rx, sz.n, false)
		})
		b.Run("rdmanet-batch/"+sz.name, func(b *testing.B) {
			g := nextGroup()
			rx := newRDMA(b, g, false, 0)
			tx := newRDMA(b, g, true, 0)
			throughput(b, tx, rx, sz.n, true)
		})
		b.Run("rdmanet-batch-gro/"+sz.name, func(b *testing.B) {
			// Both ends with receive-side UDP GRO (ListenConfig.SoftwareGRO).
			g := nextGroup()
			lc := benchConfig()
			lc.DisableLoopback, lc.SendDepth, lc.SoftwareGRO = true, 256, true
			rx := listenRDMA(b, lc, g)
			lc.SendOnly = true
			tx := listenRDMA(b, lc, g)
			throughput(b, tx, rx, sz.n, true)
		})
		b.Run("rdmanet-spin50us/"+sz.name, func(b *testing.B) {
			g := nextGroup()
			rx := newRDMA(b, g, false, 50*time.Microsecond)
			tx := newRDMA(b, g, true, 0)
			throughput(b, tx, rx, sz.n, false)
		})
		b.Run("rdmanet-lend/"+sz.name, func(b *testing.B) {
			g := nextGroup()
			rx := newRDMA(b, g, false, 0)
			rx.Lend = true
			tx := newRDMA(b, g, true, 0)
			throughput(b, tx, rx, sz.n, false)
		})
		b.Run("udp/"+sz.name, func(b *testing.B) {
			tx, rx := newUDP(b, nextGroup(), false)
			throughput(b, tx, rx, sz.n, false)
		})
		b.Run("udp-connected/"+sz.name, func(b *testing.B) {
			tx, rx := newUDP(b, nextGroup(), true)
			throughput(b, tx, rx, sz.n, false)
		})
		b.Run("ipv4-batch/"+sz.name, func(b *testing.B) {
			tx, rx := newUDP(b, nextGroup(), false)
			throughput(b, tx, rx, sz.n, true)
		})
	}
}

// ---- ping-pong latency ----

// pingpong times b.N round trips (perf.Pinger): A sends through aTx and
// reads the answer from aRx; B answers (perf.Echo) what bRx reads through
// bTx. p50 and p99 are half round trips, by the nearest-rank method.
func pingpong(b *testing.B, aTx, aRx, bTx, bRx perf.Endpoint, size int) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		perf.Echo(bRx, bTx, nil)
	}()
	p := perf.NewPinger(aTx, aRx, size, time.Second)
	lat := make([]int64, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		half, ok, err := p.RoundTrip()
		if err != nil {
			b.Fatal(err)
		}
		if !ok {
			b.Fatalf("round trip %d: no answer within 1s", i)
		}
		lat = append(lat, half.Nanoseconds())
	}
	b.StopTimer()
	perf.CloseAll(aTx, aRx, bTx, bRx)
	<-done
	slices.Sort(lat)
	b.ReportMetric(float64(perf.Percentile(lat, 50)), "p50-ns")
	b.ReportMetric(float64(perf.Percentile(lat, 99)), "p99-ns")
}

func BenchmarkPingPong(b *testing.B) {
	for _, sz := range sizes(b) {
		b.Run("rdmanet/"+sz.name, func(b *testing.B) {
			g1, g2 := nextGroup(), nextGroup()
			pingpong(b, newRDMA(b, g1, true, 0), newRDMA(b, g2, false, 0), newRDMA(b, g2, true, 0), newRDMA(b, g1, false, 0), sz.n)
		})
		b.Run("rdmanet-member/"+sz.name, func(b *testing.B) {
			g1, g2 := nextGroup(), nextGroup()
			pingpong(b, newMember(b, g1), newRDMA(b, g2, false, 0), newMember(b, g2), newRDMA(b, g1, false, 0), sz.n)
		})
		b.Run("rdmanet-spin100us/"+sz.name, func(b *testing.B) {
			g1, g2 := nextGroup(), nextGroup()
			pingpong(b, newRDMA(b, g1, true, 0), newRDMA(b, g2, false, 100*time.Microsecond), newRDMA(b, g2, true, 0), newRDMA(b, g1, false, 100*time.Microsecond), sz.n)
		})
		for _, connected := range []bool{false, true} {
			name := "udp/"
			if connected {
				name = "udp-connected/"
			}
			b.Run(name+sz.name, func(b *testing.B) {
				g1, g2 := nextGroup(), nextGroup()
				// A sends to g1, where B listens; B answers to g2, where A listens.
				aTx, bRx := newUDP(b, g1, connected)
				bTx, aRx := newUDP(b, g2, connected)
				pingpong(b, aTx, aRx, bTx, bRx, sz.n)
			})
		}
	}
}

// BenchmarkPingPongUnicast is the ping-pong with unicast both ways: UD
// datagrams to the peer's *rdmanet.Addr (on the software backend they
// reach the QP's unicast socket, whose arrivals kick the reader), beside
// two net.UDPConns on 127.0.0.1.
func BenchmarkPingPongUnicast(b *testing.B) {
	for _, sz := range sizes(b) {
		b.Run("rdmanet/"+sz.name, func(b *testing.B) {
			x, y := newRDMA(b, nextGroup(), false, 0), newRDMA(b, nextGroup(), false, 0)
			ex, err := perf.NewRDMA(x.C, y.C.LocalAddr())
			if err != nil {
				b.Fatal(err)
			}
			ey, err := perf.NewRDMA(y.C, x.C.LocalAddr())
			if err != nil {
				b.Fatal(err)
			}
			pingpong(b, ex, ex, ey, ey, sz.n)
		})
		b.Run("udp/"+sz.name, func(b *testing.B) {
			lo := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}
			x, err := net.ListenUDP("udp4", lo)
			if err != nil {
				b.Fatal(err)
			}
			y, err := net.ListenUDP("udp4", lo)
			if err != nil {
				b.Fatal(err)
			}
			ex := perf.NewUDP(x, y.LocalAddr().(*net.UDPAddr), false)
			ey := perf.NewUDP(y, x.LocalAddr().(*net.UDPAddr), false)
			pingpong(b, ex, ex, ey, ey, sz.n)
		})
	}
}

// ---- single-call costs ----

func BenchmarkWriteTo(b *testing.B) {
	for _, sz := range sizes(b) {
		for _, kind := range []string{"rdmanet", "rdmanet-member", "udp", "udp-connected"} {
			b.Run(kind+"/"+sz.name, func(b *testing.B) {
				var e perf.Endpoint
				switch kind {
				case "rdmanet":
					e = newRDMA(b, nextGroup(), true, 0)
				case "rdmanet-member":
					e = newMember(b, nextGroup())
				default:
					// The receiver is joined, as it always was here,
					// and never read.
					tx, rx := newUDP(b, nextGroup(), kind == "udp-connected")
					defer rx.Close()
					e = tx
				}
				defer e.Close()
				p := make([]byte, sz.n)
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					if err := e.Send(p); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
