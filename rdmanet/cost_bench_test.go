//go:build linux

package rdmanet_test

import (
	"context"
	"net"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/ipv4"

	"github.com/go-rdma/rdmanet/internal/perf"
	"github.com/go-rdma/rdmanet/rdmanet"
)

// What a conn costs beside a net.UDPConn joined to the same group on lo,
// measured the same way in the same run:
//
//	unshare -n sh -c 'ip link set lo up && go test ./rdmanet -run ^$ -bench Cost -benchtime 5x'
//
// BenchmarkCostListenClose: ListenMulticast + Close, p50 and p99; the UDP
// side's interface is looked up once, outside the timed loop, as
// rdmanet's side is (nil: loopback).
// BenchmarkCostPerConn: fds and resident memory per conn, idle and after
// 64 datagrams of 1 KiB read from each.
// BenchmarkCostCloseGroups: Close of a conn joined to 1000 groups (needs a
// private network namespace, where igmp_max_memberships is raised).

// costEndpoint is a conn of either kind.
type costEndpoint interface{ Close() error }

type costKind struct {
	name   string
	listen func(tb testing.TB, g *net.UDPAddr) costEndpoint
	join   func(tb testing.TB, c costEndpoint, g *net.UDPAddr)
}

var costKinds = []costKind{
	{"rdmanet", func(tb testing.TB, g *net.UDPAddr) costEndpoint {
		lc := testConfig()
		c, err := lc.ListenMulticast(context.Background(), "rdma", nil, g)
		require.NoError(tb, err)
		return c
	}, func(tb testing.TB, c costEndpoint, g *net.UDPAddr) {
		require.NoError(tb, c.(*rdmanet.Conn).JoinGroup(nil, g))
	}},
	{"udp", func(tb testing.TB, g *net.UDPAddr) costEndpoint {
		c, err := net.ListenMulticastUDP("udp4", loopbackIfi(tb), udpGroup(g))
		require.NoError(tb, err)
		c.SetReadBuffer(rdmanet.SoftwareSocketBuffer)
		return c
	}, func(tb testing.TB, c costEndpoint, g *net.UDPAddr) {
		require.NoError(tb, ipv4.NewPacketConn(c.(*net.UDPConn)).JoinGroup(loopbackIfi(tb), udpGroup(g)))
	}},
}

// udpGroup is g on another port than RoCEv2's.
func udpGroup(g *net.UDPAddr) *net.UDPAddr { return &net.UDPAddr{IP: g.IP, Port: 5791} }

// loopback is lo, looked up once: net.InterfaceByName is a netlink dump
// (tens of µs), which a program does once and not per conn, and which
// rdmanet's side does not pay per conn either (the software backend
// keeps the namespace's links and reads them again only on a change).
var loopback = sync.OnceValues(func() (*net.Interface, error) { return net.InterfaceByName("lo") })

func loopbackIfi(tb testing.TB) *net.Interface {
	ifi, err := loopback()
	require.NoError(tb, err)
	return ifi
}

func BenchmarkCostListenClose(b *testing.B) {
	for _, k := range costKinds {
		b.Run(k.name, func(b *testing.B) {
			g := newGroup()
			k.listen(b, g).Close() // lazy package state is not a conn's
			lat := make([]int64, 0, b.N)
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				c := k.listen(b, g)
				c.Close()
				lat = append(lat, int64(time.Since(t0)))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(perf.Percentile(lat, 50)), "p50-ns")
			b.ReportMetric(float64(perf.Percentile(lat, 99)), "p99-ns")
		})
	}
}

func BenchmarkCostPerConn(b *testing.B) {
	const n, msgs, size = 64, 64, 1024
	for _, k := range costKinds {
		b.Run(k.name, func(b *testing.B) {
			var fds, idle, used float64
			tx, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			require.NoError(b, err)
			defer tx.Close()
			require.NoError(b, ipv4.NewPacketConn(tx).SetMulticastInterface(loopbackIfi(b)))
			for range b.N {
				groups := make([]*net.UDPAddr, n)
				conns := make([]costEndpoint, n)
				debug.FreeOSMemory()
				fd0, rss0 := countFDs(b), residentKiB(b)
				for i := range conns {
					groups[i] = newGroup()
					conns[i] = k.listen(b, groups[i])
				}
				debug.FreeOSMemory()
				fds = float64(countFDs(b)-fd0) / n
				idle = float64(residentKiB(b)-rss0) / n
				for i, c := range conns {
					fill(b, k.name, tx, c, groups[i], msgs, size)
				}
				debug.FreeOSMemory()
				used = float64(residentKiB(b)-rss0) / n
				for _, c := range conns {
					c.Close()
				}
			}
			b.ReportMetric(fds, "fds/conn")
			b.ReportMetric(idle, "idle-KiB/conn")
			b.ReportMetric(used, "used-KiB/conn")
		})
	}
}

// fill sends msgs datagrams to g and reads them from c.
func fill(b *testing.B, kind string, tx *net.UDPConn, c costEndpoint, g *net.UDPAddr, msgs, size int) {
	payload := make([]byte, size)
	buf := make([]byte, 2*size)
	var send func() error
	if kind == "udp" {
		send = func() error { _, err := tx.WriteToUDP(payload, udpGroup(g)); return err }
	} else {
		rc := c.(*rdmanet.Conn)
		send = func() error { _, err := rc.WriteTo(payload, g); return err }
	}
	for range msgs {
		require.NoError(b, send())
		var err error
		switch c := c.(type) {
		case *net.UDPConn:
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			_, _, err = c.ReadFrom(buf)
		case *rdmanet.Conn:
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			_, _, err = c.ReadFromAddr(buf)
		}
		require.NoError(b, err)
	}
}

func BenchmarkCostCloseGroups(b *testing.B) {
	const groups = 1000
	raiseGroupLimit(b, groups+16)
	for _, k := range costKinds {
		b.Run(k.name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			for range b.N {
				b.StopTimer()
				c := k.listen(b, newGroup())
				for range groups - 1 {
					k.join(b, c, newGroup())
				}
				b.StartTimer()
				t0 := time.Now()
				c.Close()
				lat = append(lat, time.Since(t0))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
		})
	}
}

// raiseGroupLimit raises net.ipv4.igmp_max_memberships to at least n, in a
// namespace whose only interface is lo (a private one, as unshare -n
// makes); elsewhere it skips.
func raiseGroupLimit(b *testing.B, n int) {
	ifs, err := net.Interfaces()
	if err != nil || len(ifs) != 1 || ifs[0].Name != "lo" {
		b.Skip("needs a private network namespace: unshare -n sh -c 'ip link set lo up && go test ...'")
	}
	const knob = "/proc/sys/net/ipv4/igmp_max_memberships"
	if err := os.WriteFile(knob, []byte(strconv.Itoa(n)), 0); err != nil {
		b.Skipf("cannot raise %s: %v", knob, err)
	}
}
