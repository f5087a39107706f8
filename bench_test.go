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
// The baselines get what a Go program gets at its best: every UDP
// receiver asks for the same SO_RCVBUF as the software backend's
// sockets (benchRcvBuf; the kernel caps both at net.core.rmem_max, and
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
	"math"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-rdma/rdmanet/internal/verbs/rdmacore"
	"github.com/go-rdma/rdmanet/rdmanet"
	"golang.org/x/net/ipv4"
)

// benchRcvBuf is the SO_RCVBUF the software backend asks for its sockets
// (internal/verbs/soft); every UDP receiver here asks for the same.
const benchRcvBuf = 4 << 20

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
	} else if rx, err := net.ListenMulticastUDP("udp4", lo, nextGroup()); err != nil {
		udp = err.Error()
	} else {
		if err := rx.SetReadBuffer(benchRcvBuf); err == nil {
			if n, err := sockRcvBuf(rx); err == nil {
				udp = strconv.Itoa(n)
			}
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
	return fmt.Sprintf("rcvbuf: asked=%d rmem_max=%s udp=%s rdmanet=%s", benchRcvBuf, rmem, udp, rdma)
}

func sockRcvBuf(c *net.UDPConn) (int, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var serr error
	if err := rc.Control(func(fd uintptr) { n, serr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF) }); err != nil {
		return 0, err
	}
	return n, serr
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
		if mtu := e.c.MTU(); mtu > 1024 {
			sizeList = append(sizeList, size{fmt.Sprintf("MTU%d", mtu), mtu})
		}
		e.close()
	})
	return sizeList
}

var groupN atomic.Uint32

func nextGroup() *net.UDPAddr {
	n := groupN.Add(1) + uint32(os.Getpid()%100)*200
	return &net.UDPAddr{IP: net.IPv4(239, 88, byte(n>>8), byte(n)), Port: 30000 + int(n%20000)}
}

// endpoint is one side of a benchmark: a receiver and a sender on a group.
type endpoint interface {
	send(b []byte) error
	sendBatch(bs [][]byte) error
	recv(b []byte) (int, error)
	recvBatch(bufs [][]byte) (int, error)
	close()
}

// ---- rdmanet ----

type rdmaEP struct {
	c     *rdmanet.Conn
	group *net.UDPAddr
	ga    rdmanet.Addr
	out   []rdmanet.Message
	in    []rdmanet.Message
	lend  bool // receive with ReadLend (no copy) instead of ReadFromAddr
}

// benchConfig is the software backend on loopback, or, in the Soft-RoCE VM
// (RDMANET_TEST_DEVICE and RDMANET_TEST_ADDR set), rdma-core on that
// device, to set beside the harness's ib_send_bw run.
func benchConfig() rdmanet.ListenConfig {
	if dev := os.Getenv("RDMANET_TEST_DEVICE"); dev != "" {
		// A UD QP's receive ring is all the buffering it has.
		return rdmanet.ListenConfig{Backend: rdmanet.BackendRDMACore, Device: dev, LocalAddr: net.ParseIP(os.Getenv("RDMANET_TEST_ADDR")), RecvDepth: 2048}
	}
	return rdmanet.ListenConfig{Backend: rdmanet.BackendSoftware}
}

func newRDMA(tb testing.TB, group *net.UDPAddr, sendOnly bool, spin time.Duration) *rdmaEP {
	lc := benchConfig()
	// The software backend keeps its default ring: the socket buffer does
	// the buffering there, as for the UDP baseline.
	lc.SendOnly, lc.DisableLoopback, lc.SendDepth, lc.Spin = sendOnly, true, 256, spin
	return listenRDMA(tb, lc, group)
}

// newMember is the sender a newcomer writes: a conn with the default
// options (full member, loopback on), so it also receives what it sends.
func newMember(tb testing.TB, group *net.UDPAddr) *rdmaEP {
	return listenRDMA(tb, benchConfig(), group)
}

func listenRDMA(tb testing.TB, lc rdmanet.ListenConfig, group *net.UDPAddr) *rdmaEP {
	c, err := lc.ListenMulticast(context.Background(), "rdma", nil, group)
	if err != nil {
		tb.Fatal(err)
	}
	ga, err := c.GroupAddr(group)
	if err != nil {
		tb.Fatal(err)
	}
	return &rdmaEP{c: c, group: group, ga: ga, out: make([]rdmanet.Message, 64), in: make([]rdmanet.Message, 64)}
}

func (e *rdmaEP) send(b []byte) error { _, err := e.c.WriteTo(b, e.group); return err }
func (e *rdmaEP) sendBatch(bs [][]byte) error {
	ms := e.out[:len(bs)]
	for i, b := range bs {
		ms[i].Buffer, ms[i].Addr = b, e.ga
	}
	_, err := e.c.WriteBatch(ms)
	return err
}
func (e *rdmaEP) recv(b []byte) (int, error) {
	if e.lend {
		d, err := e.c.ReadLend()
		n := len(d.Payload)
		d.Release()
		return n, err
	}
	n, _, err := e.c.ReadFromAddr(b)
	return n, err
}
func (e *rdmaEP) recvBatch(bufs [][]byte) (int, error) {
	ms := e.in[:len(bufs)]
	for i, b := range bufs {
		ms[i].Buffer = b
	}
	return e.c.ReadBatch(ms)
}
func (e *rdmaEP) close() { e.c.Close() }

// ---- net.UDPConn and x/net/ipv4 ----

type udpEP struct {
	rx        *net.UDPConn
	tx        *net.UDPConn
	rxp       *ipv4.PacketConn
	txp       *ipv4.PacketConn
	group     *net.UDPAddr
	connected bool // tx is connected to the group: Write, not WriteToUDP
	out       []ipv4.Message
	in        []ipv4.Message
}

func loopback(tb testing.TB) *net.Interface {
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		tb.Fatal(err)
	}
	return lo
}

// newUDP is a net.ListenMulticastUDP receiver on lo with benchRcvBuf, and
// a sender from 127.0.0.1 with IP_MULTICAST_IF lo and loopback on:
// unconnected, or connected to the group (net.DialUDP + Write).
func newUDP(tb testing.TB, group *net.UDPAddr, connected bool) *udpEP {
	lo := loopback(tb)
	rx, err := net.ListenMulticastUDP("udp4", lo, group)
	if err != nil {
		tb.Fatal(err)
	}
	if err := rx.SetReadBuffer(benchRcvBuf); err != nil {
		tb.Fatal(err)
	}
	local := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}
	var tx *net.UDPConn
	if connected {
		// net.DialUDP, with the multicast interface set before the
		// connect: the kernel routes a multicast connect by it.
		d := net.Dialer{LocalAddr: local, Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) {
				serr = syscall.SetsockoptIPMreqn(int(fd), syscall.IPPROTO_IP, syscall.IP_MULTICAST_IF,
					&syscall.IPMreqn{Ifindex: int32(lo.Index)})
			})
			if err != nil {
				return err
			}
			return serr
		}}
		c, err := d.Dial("udp4", group.String())
		if err != nil {
			tb.Fatal(err)
		}
		tx = c.(*net.UDPConn)
	} else if tx, err = net.ListenUDP("udp4", local); err != nil {
		tb.Fatal(err)
	}
	txp := ipv4.NewPacketConn(tx)
	if err := txp.SetMulticastInterface(lo); err != nil {
		tb.Fatal(err)
	}
	if err := txp.SetMulticastLoopback(true); err != nil {
		tb.Fatal(err)
	}
	e := &udpEP{rx: rx, tx: tx, rxp: ipv4.NewPacketConn(rx), txp: txp, group: group, connected: connected,
		out: make([]ipv4.Message, 64), in: make([]ipv4.Message, 64)}
	for i := range e.out {
		e.out[i].Buffers = make([][]byte, 1)
		e.out[i].Addr = group
		e.in[i].Buffers = make([][]byte, 1)
	}
	return e
}

func (e *udpEP) send(b []byte) error {
	var err error
	if e.connected {
		_, err = e.tx.Write(b)
	} else {
		_, err = e.tx.WriteToUDP(b, e.group)
	}
	return err
}
func (e *udpEP) recv(b []byte) (int, error) { n, _, err := e.rx.ReadFromUDP(b); return n, err }
func (e *udpEP) sendBatch(bs [][]byte) error {
	ms := e.out[:len(bs)]
	for i, b := range bs {
		ms[i].Buffers[0] = b
	}
	for len(ms) > 0 {
		n, err := e.txp.WriteBatch(ms, 0)
		if err != nil {
			return err
		}
		ms = ms[n:]
	}
	return nil
}
func (e *udpEP) recvBatch(bufs [][]byte) (int, error) {
	ms := e.in[:len(bufs)]
	for i, b := range bufs {
		ms[i].Buffers[0] = b
	}
	return e.rxp.ReadBatch(ms, 0)
}
func (e *udpEP) close() { e.rx.Close(); e.tx.Close() }

// ---- throughput ----

// throughput floods from tx and times b.N receives on rx.
func throughput(b *testing.B, tx, rx endpoint, size int, batch bool) {
	payload := make([]byte, size)
	var sent atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		bs := make([][]byte, 32)
		for i := range bs {
			bs[i] = payload
		}
		for {
			select {
			case <-stop:
				return
			default:
			}
			if batch {
				if tx.sendBatch(bs) != nil {
					return
				}
				sent.Add(uint64(len(bs)))
			} else {
				for i := 0; i < 32; i++ {
					if tx.send(payload) != nil {
						return
					}
				}
				sent.Add(32)
			}
		}
	}()
	bufs := make([][]byte, 32)
	for i := range bufs {
		bufs[i] = make([]byte, 4096)
	}
	// Warm up: the flow is running before the clock starts.
	if _, err := rx.recv(bufs[0]); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	s0 := sent.Load()
	c0 := rdmacore.Crossings()
	got := 0
	for got < b.N {
		if batch {
			n, err := rx.recvBatch(bufs)
			if err != nil {
				b.Fatal(err)
			}
			got += n
		} else {
			if _, err := rx.recv(bufs[0]); err != nil {
				b.Fatal(err)
			}
			got++
		}
	}
	el := time.Since(start)
	b.StopTimer()
	s1 := sent.Load()
	if c1 := rdmacore.Crossings(); c1 > c0 {
		// rdma-core only: sender and receiver together, per message sent.
		b.ReportMetric(float64(c1-c0)/float64(s1-s0), "cgo/msg")
	}
	close(stop)
	tx.close()
	rx.close()
	wg.Wait()
	b.ReportMetric(float64(got)/el.Seconds(), "msgs/s")
	if s1 > s0 && s1-s0 > uint64(got) {
		b.ReportMetric(float64(s1-s0-uint64(got))/float64(s1-s0)*100, "drop%")
	} else {
		b.ReportMetric(0, "drop%")
	}
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
			rx.lend = true
			tx := newRDMA(b, g, true, 0)
			throughput(b, tx, rx, sz.n, false)
		})
		b.Run("udp/"+sz.name, func(b *testing.B) {
			e := newUDP(b, nextGroup(), false)
			throughput(b, e, e, sz.n, false)
		})
		b.Run("udp-connected/"+sz.name, func(b *testing.B) {
			e := newUDP(b, nextGroup(), true)
			throughput(b, e, e, sz.n, false)
		})
		b.Run("ipv4-batch/"+sz.name, func(b *testing.B) {
			e := newUDP(b, nextGroup(), false)
			throughput(b, e, e, sz.n, true)
		})
	}
}

// ---- ping-pong latency ----

func pingpong(b *testing.B, aTx, aRx, bTx, bRx endpoint, size int) {
	payload := make([]byte, size)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, err := bRx.recv(buf)
			if err != nil {
				return
			}
			if bTx.send(buf[:n]) != nil {
				return
			}
		}
	}()
	buf := make([]byte, 4096)
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := aTx.send(payload); err != nil {
			b.Fatal(err)
		}
		if _, err := aRx.recv(buf); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0)/2)
	}
	b.StopTimer()
	for _, e := range []endpoint{aTx, aRx, bTx, bRx} {
		e.close()
	}
	<-done
	slices.Sort(lat)
	b.ReportMetric(float64(percentile(lat, 50).Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(percentile(lat, 99).Nanoseconds()), "p99-ns")
}

// percentile is the p-th percentile of sorted by the nearest-rank method
// (the smallest value with at least p% of the values at or below it), as
// `rdmanet perf` reports it.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p/100*float64(len(sorted)) - 1e-9))
	return sorted[max(1, min(rank, len(sorted)))-1]
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
				a, c := newUDP(b, g1, connected), newUDP(b, g2, connected)
				// a.tx sends to g1 where c.rx listens; c.tx answers to g2 where a.rx listens.
				pingpong(b, a, swapRx{a, c}, c, swapRx{c, a}, sz.n)
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
			ex, ey := &uniEP{c: x.c, to: y.c.LocalAddr()}, &uniEP{c: y.c, to: x.c.LocalAddr()}
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
			ex := &udpUniEP{c: x, to: y.LocalAddr().(*net.UDPAddr)}
			ey := &udpUniEP{c: y, to: x.LocalAddr().(*net.UDPAddr)}
			pingpong(b, ex, ex, ey, ey, sz.n)
		})
	}
}

// uniEP sends unicast to one peer; closing it twice is harmless.
type uniEP struct {
	c  *rdmanet.Conn
	to net.Addr
}

func (e *uniEP) send(b []byte) error { _, err := e.c.WriteTo(b, e.to); return err }
func (e *uniEP) recv(b []byte) (int, error) {
	n, _, err := e.c.ReadFromAddr(b)
	return n, err
}
func (e *uniEP) sendBatch([][]byte) error        { panic("not used") }
func (e *uniEP) recvBatch([][]byte) (int, error) { panic("not used") }
func (e *uniEP) close()                          { e.c.Close() }

type udpUniEP struct {
	c  *net.UDPConn
	to *net.UDPAddr
}

func (e *udpUniEP) send(b []byte) error             { _, err := e.c.WriteToUDP(b, e.to); return err }
func (e *udpUniEP) recv(b []byte) (int, error)      { n, _, err := e.c.ReadFromUDP(b); return n, err }
func (e *udpUniEP) sendBatch([][]byte) error        { panic("not used") }
func (e *udpUniEP) recvBatch([][]byte) (int, error) { panic("not used") }
func (e *udpUniEP) close()                          { e.c.Close() }

// swapRx reads from another endpoint's receiver: the UDP endpoints pair a
// receiver on one group with a sender to the same group.
type swapRx struct{ self, other *udpEP }

func (s swapRx) send(b []byte) error                  { return s.self.send(b) }
func (s swapRx) sendBatch(bs [][]byte) error          { return s.self.sendBatch(bs) }
func (s swapRx) recv(b []byte) (int, error)           { return s.other.recv(b) }
func (s swapRx) recvBatch(bufs [][]byte) (int, error) { return s.other.recvBatch(bufs) }
func (s swapRx) close()                               {}

// ---- single-call costs ----

func BenchmarkWriteTo(b *testing.B) {
	for _, sz := range sizes(b) {
		for _, kind := range []string{"rdmanet", "rdmanet-member", "udp", "udp-connected"} {
			b.Run(kind+"/"+sz.name, func(b *testing.B) {
				var e endpoint
				switch kind {
				case "rdmanet":
					e = newRDMA(b, nextGroup(), true, 0)
				case "rdmanet-member":
					e = newMember(b, nextGroup())
				default:
					e = newUDP(b, nextGroup(), kind == "udp-connected")
				}
				defer e.close()
				p := make([]byte, sz.n)
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					if err := e.send(p); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// The benchmarks' percentiles are nearest-rank ones, as `rdmanet perf`
// prints (cmd/rdmanet TestPercentile): p99 of 1..1000 is 990, where the
// index len*99/100 gave 991.
func TestPercentileNearestRank(t *testing.T) {
	for _, tc := range []struct {
		n    int
		p    float64
		want time.Duration
	}{{100, 50, 50}, {100, 99, 99}, {1000, 50, 500}, {1000, 99, 990}, {1000, 99.9, 999}, {1, 99, 1}, {2, 50, 1}, {2, 51, 2}} {
		s := make([]time.Duration, tc.n)
		for i := range s {
			s[i] = time.Duration(i + 1)
		}
		if got := percentile(s, tc.p); got != tc.want {
			t.Errorf("p%v of 1..%d: got %d, want %d", tc.p, tc.n, got, tc.want)
		}
	}
	if got := percentile(nil, 99); got != 0 {
		t.Errorf("p99 of nothing: got %d, want 0", got)
	}
}
