//go:build linux

package rdmanet_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-rdma/rdmanet/ipoib"
	"github.com/go-rdma/rdmanet/rdmanet"
)

// BenchmarkPingUnicastReply is the event-driven ping-pong of issue 14's
// "answered by UD unicast": the pinger sends to a group, the ponger
// answers each ping with a unicast datagram to the ping's sender, and the
// pinger reads the answer on the conn it sent from. Beside it, the same
// with the answer on a second group, as the issue measured it.
//
// The pinger's conn is a full member, or a send-only member (not
// attached to the group, it still receives unicast). A full member on a device that cannot block its
// own multicast loopback (rxe) gets a copy of every ping it sends: the
// conn filters it (DisableLoopback) but the copy still wakes the reader,
// which then sleeps again before the answer comes. own-copies/op counts
// those copies (Stats().Loopback).
func BenchmarkPingUnicastReply(b *testing.B) {
	for _, size := range []int{64, 1024} {
		name := "64B"
		if size == 1024 {
			name = "1KiB"
		}
		if testDevice != "" {
			// The baselines, in the same run: perftest's UD ping-pong
			// sleeping on CQ events (-e), and polling.
			b.Run("ib_send_lat-e/"+name, func(b *testing.B) { perftestLat(b, size, true) })
			b.Run("ib_send_lat/"+name, func(b *testing.B) { perftestLat(b, size, false) })
			b.Run("full-member-pinger-spin50us/"+name, func(b *testing.B) {
				g := newGroup()
				spin := func(lc *rdmanet.ListenConfig) { lc.DisableLoopback, lc.Spin = true, 50*time.Microsecond }
				pinger, ponger := listen(b, g, spin), listen(b, g, spin)
				pingReply(b, size, pinger, pinger, ponger, g, nil)
			})
		}
		b.Run("full-member-pinger/"+name, func(b *testing.B) {
			g := newGroup()
			pinger := listen(b, g, func(lc *rdmanet.ListenConfig) { lc.DisableLoopback = true })
			ponger := listen(b, g, func(lc *rdmanet.ListenConfig) { lc.DisableLoopback = true })
			pingReply(b, size, pinger, pinger, ponger, g, nil)
		})
		b.Run("send-only-pinger/"+name, func(b *testing.B) {
			// A send-only member is not attached: no copy of its pings.
			g := newGroup()
			pinger := listen(b, g, func(lc *rdmanet.ListenConfig) { lc.SendOnly = true })
			ponger := listen(b, g, func(lc *rdmanet.ListenConfig) { lc.DisableLoopback = true })
			pingReply(b, size, pinger, pinger, ponger, g, nil)
		})
		b.Run("second-group-reply/"+name, func(b *testing.B) {
			g, g2 := newGroup(), newGroup()
			tx := listen(b, g, func(lc *rdmanet.ListenConfig) { lc.SendOnly = true })
			rx := listen(b, g2, func(lc *rdmanet.ListenConfig) { lc.DisableLoopback = true })
			ponger := listen(b, g, func(lc *rdmanet.ListenConfig) { lc.DisableLoopback = true })
			if err := ponger.JoinGroup(nil, g2); err != nil {
				b.Fatal(err)
			}
			pingReply(b, size, tx, rx, ponger, g, g2)
		})
	}
}

// pingReply runs the ping-pong: tx pings g, ponger answers to the ping's
// sender (unicast; or to group reply when set), rx reads the answer.
func pingReply(b *testing.B, size int, tx, rx, ponger *rdmanet.Conn, g, reply *net.UDPAddr) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, from, err := ponger.ReadFromAddr(buf)
			if err != nil {
				return
			}
			var to net.Addr = &from
			if reply != nil {
				to = reply
			}
			if _, err := ponger.WriteTo(buf[:n], to); err != nil {
				return
			}
		}
	}()
	payload := make([]byte, size)
	buf := make([]byte, 4096)
	lat := make([]time.Duration, 0, b.N)
	l0 := rx.Stats().Loopback
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := tx.WriteTo(payload, g); err != nil {
			b.Fatal(err)
		}
		rx.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, _, err := rx.ReadFromAddr(buf); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0)/2)
	}
	b.StopTimer()
	ponger.Close()
	<-done
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
	b.ReportMetric(float64(rx.Stats().Loopback-l0)/float64(b.N), "own-copies/op")
}

// perftestLat runs ib_send_lat -c UD on the test device to itself and
// reports its typical (median) one-way latency as p50-ns. It runs once,
// whatever b.N.
func perftestLat(b *testing.B, size int, events bool) {
	gid := gidIndex(b, testDevice, net.ParseIP(testAddr))
	args := []string{"-d", testDevice, "-c", "UD", "-s", strconv.Itoa(size), "-n", "5000", "-x", strconv.Itoa(gid)}
	if events {
		args = append(args, "-e")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := exec.CommandContext(ctx, "ib_send_lat", args...)
	var srvOut strings.Builder
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	time.Sleep(time.Second) // the server listens on TCP 18515 for the handshake
	out, err := exec.CommandContext(ctx, "ib_send_lat", append(args, testAddr)...).CombinedOutput()
	srv.Wait()
	if err != nil {
		b.Fatalf("ib_send_lat %v: %v\n%s\nserver:\n%s", args, err, out, srvOut.String())
	}
	// #bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) >= 5 && f[0] == strconv.Itoa(size) {
			typ, err := strconv.ParseFloat(f[4], 64)
			if err == nil {
				b.ReportMetric(typ*1000, "p50-ns")
				if len(f) >= 8 {
					if p99, err := strconv.ParseFloat(f[7], 64); err == nil {
						b.ReportMetric(p99*1000, "p99-ns")
					}
				}
				return
			}
		}
	}
	b.Fatalf("ib_send_lat: no result row:\n%s", out)
}

// gidIndex is the index of ip's RoCE v2 GID on port 1 of dev.
func gidIndex(b *testing.B, dev string, ip net.IP) int {
	want := ipoib.GID{}
	want[10], want[11] = 0xff, 0xff
	copy(want[12:], ip.To4())
	dir := filepath.Join("/sys/class/infiniband", dev, "ports/1/gids")
	for i := 0; i < 256; i++ {
		g, err := os.ReadFile(filepath.Join(dir, strconv.Itoa(i)))
		if err != nil {
			break
		}
		typ, _ := os.ReadFile(filepath.Join("/sys/class/infiniband", dev, "ports/1/gid_attrs/types", strconv.Itoa(i)))
		if strings.TrimSpace(string(g)) == fmt.Sprint(gidString(want)) && strings.Contains(string(typ), "v2") {
			return i
		}
	}
	b.Fatalf("no RoCE v2 GID for %s on %s", ip, dev)
	return 0
}

// gidString is a GID as sysfs prints it: eight groups of four hex digits.
func gidString(g ipoib.GID) string {
	var parts []string
	for i := 0; i < 16; i += 2 {
		parts = append(parts, fmt.Sprintf("%02x%02x", g[i], g[i+1]))
	}
	return strings.Join(parts, ":")
}
