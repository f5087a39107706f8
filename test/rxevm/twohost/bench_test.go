//go:build linux

package twohost

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"regexp"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-rdma/rdmanet/internal/perf"
	"github.com/go-rdma/rdmanet/internal/poller"
	"github.com/go-rdma/rdmanet/rdmanet"
	"github.com/go-rdma/rdmanet/test/rxevm/peer"
	"github.com/stretchr/testify/require"
)

// The comparison with perftest across the link (`make bench-rxe2`): each
// round measures perftest's UD latency (ib_send_lat -c UD, with -e: events,
// and without: polling) and rate (ib_send_bw -c UD), and rdmanet's
// ping-pong and flood beside them, b answering or receiving, a asking or
// sending. Ratios are taken within a round (emulation speed drifts), and
// the table gives each round's ratio and their median.

const (
	benchPingIters = 1000  // round trips, as ib_send_lat's default
	benchBWIters   = 20000 // messages, as the one-VM harness's ib_send_bw
	benchSpin      = 50 * time.Microsecond
	// benchSpinRTT covers the round trip under TCG (200 µs to 1.5 ms
	// here), so that the reader polls for the whole wait, as polling
	// ib_send_lat does: the comparison with the same resources.
	benchSpinRTT = 2 * time.Millisecond
	// The rate rows' queues, the same on both sides of the comparison:
	// benchRecvDepth receives posted (the rate helper's -depth,
	// ib_send_bw's --rx-depth); the sender's queue benchSendDepth deep
	// (rdmanet's default SendDepth, ib_send_bw's --tx-depth) with one send
	// in benchSendDepth/4 signaled (rdmanet's signalEvery in
	// rdmanet/send.go, ib_send_bw's --cq-mod).
	benchRecvDepth = 2048
	benchSendDepth = 256
)

// benchCase is one row of the table: a measure and the perftest baseline
// it is set beside.
type benchCase struct {
	name     string
	size     int
	baseline string // the baseline row's name
	higher   bool   // rate (higher is better) rather than latency
	run      func(t *testing.T, s *site, size int) float64
}

// derivedRow is a row of ratios between two measured rows of the same
// round: of's value over over's.
type derivedRow struct {
	name     string
	size     int
	of, over string
}

func TestBenchTwoHost(t *testing.T) {
	rounds, _ := strconv.Atoi(os.Getenv("RDMANET_TEST_BENCH_ROUNDS"))
	if rounds <= 0 {
		t.Skip("RDMANET_TEST_BENCH_ROUNDS not set: run `make bench-rxe2`")
	}
	s := needPeer(t)
	printClock()
	var cases []benchCase
	var derived []derivedRow
	for _, size := range []int{64, 1024} {
		cases = append(cases,
			benchCase{"ib_send_lat -c UD -e (p50 us)", size, "", false, func(t *testing.T, s *site, n int) float64 { return s.perftestLat(t, n, true) }},
			benchCase{"ib_send_lat -c UD (p50 us)", size, "", false, func(t *testing.T, s *site, n int) float64 { return s.perftestLat(t, n, false) }},
			// The Go floor: what the Go runtime itself costs an
			// event-driven ping-pong here, without RDMA. A plain
			// connected net.UDPConn (the echo a plain UDPConn too)
			// beside sockperf (C, blocking recvfrom) over the same link,
			// then rdmanet's Spin 0 rows beside that net.UDPConn.
			benchCase{"sockperf ping-pong, UDP (p50 us)", size, "", false, func(t *testing.T, s *site, n int) float64 { return s.sockperfPingPong(t, n) }},
			benchCase{"net.UDPConn ping-pong (p50 us)", size, "sockperf ping-pong, UDP (p50 us)", false,
				func(t *testing.T, s *site, n int) float64 { return s.udpPingPong(t, n) }},
			benchCase{"rdmanet ping-pong, multicast answer, Spin 0", size, "ib_send_lat -c UD -e (p50 us)", false,
				func(t *testing.T, s *site, n int) float64 { return s.pingPong(t, n, false, 0) }},
			benchCase{"rdmanet ping-pong, unicast answer, Spin 0", size, "ib_send_lat -c UD -e (p50 us)", false,
				func(t *testing.T, s *site, n int) float64 { return s.pingPong(t, n, true, 0) }},
			benchCase{"rdmanet ping-pong, multicast answer, Spin 0, eager drains", size, "ib_send_lat -c UD -e (p50 us)", false,
				func(t *testing.T, s *site, n int) float64 {
					return s.eagerDrains(func() float64 { return s.pingPong(t, n, false, 0) })
				}},
			benchCase{"rdmanet ping-pong, unicast answer, Spin 0, eager drains", size, "ib_send_lat -c UD -e (p50 us)", false,
				func(t *testing.T, s *site, n int) float64 {
					return s.eagerDrains(func() float64 { return s.pingPong(t, n, true, 0) })
				}},
			benchCase{"rdmanet perf pingpong (cmd/rdmanet), Spin 0", size, "ib_send_lat -c UD -e (p50 us)", false,
				func(t *testing.T, s *site, n int) float64 { return s.perfPingPong(t, n) }},
			benchCase{"rdmanet ping-pong, multicast answer, Spin 50us", size, "ib_send_lat -c UD (p50 us)", false,
				func(t *testing.T, s *site, n int) float64 { return s.pingPong(t, n, false, benchSpin) }},
			benchCase{"rdmanet ping-pong, unicast answer, Spin 50us", size, "ib_send_lat -c UD (p50 us)", false,
				func(t *testing.T, s *site, n int) float64 { return s.pingPong(t, n, true, benchSpin) }},
			benchCase{"rdmanet ping-pong, multicast answer, Spin 2ms", size, "ib_send_lat -c UD (p50 us)", false,
				func(t *testing.T, s *site, n int) float64 { return s.pingPong(t, n, false, benchSpinRTT) }},
			benchCase{"rdmanet ping-pong, unicast answer, Spin 2ms", size, "ib_send_lat -c UD (p50 us)", false,
				func(t *testing.T, s *site, n int) float64 { return s.pingPong(t, n, true, benchSpinRTT) }},
			// The multicast ping-pong with no conn a member of the group
			// it sends to: requests and answers each go out through a
			// send-only conn, so no host loops its own datagram back.
			benchCase{"rdmanet ping-pong, multicast answer, send-only senders, Spin 0", size, "ib_send_lat -c UD -e (p50 us)", false,
				func(t *testing.T, s *site, n int) float64 { return s.pingPongSendConns(t, n, 0) }},
			benchCase{"rdmanet ping-pong, multicast answer, send-only senders, Spin 2ms", size, "ib_send_lat -c UD (p50 us)", false,
				func(t *testing.T, s *site, n int) float64 { return s.pingPongSendConns(t, n, benchSpinRTT) }},
			// The rates, each beside the ib_send_bw with its resources:
			// an event-driven receiver (Spin 0) beside -e, a spinning one
			// beside polling; both with benchRecvDepth receives posted and
			// the sender's queue as rdmanet's (see perftestBW).
			benchCase{"ib_send_bw -c UD -e (msgs/s)", size, "", true, func(t *testing.T, s *site, n int) float64 { return s.perftestBW(t, n, true) }},
			benchCase{"ib_send_bw -c UD (msgs/s)", size, "", true, func(t *testing.T, s *site, n int) float64 { return s.perftestBW(t, n, false) }},
			// The Go floor of a sender: one datagram a system call,
			// sockperf's (C) against a net.UDPConn's Write, the same
			// server, the sender's rate.
			benchCase{"sockperf throughput, UDP send (msgs/s)", size, "", true, func(t *testing.T, s *site, n int) float64 { return s.sockperfSend(t, n) }},
			benchCase{"net.UDPConn Write, UDP send (msgs/s)", size, "sockperf throughput, UDP send (msgs/s)", true,
				func(t *testing.T, s *site, n int) float64 { return s.udpSend(t, n) }},
			benchCase{"rdmanet WriteTo/ReadFrom, multicast, Spin 0 (msgs/s)", size, "ib_send_bw -c UD -e (msgs/s)", true,
				func(t *testing.T, s *site, n int) float64 { return s.flood(t, n, 1, 0, false) }},
			benchCase{"rdmanet batches of 32, multicast, Spin 0 (msgs/s)", size, "ib_send_bw -c UD -e (msgs/s)", true,
				func(t *testing.T, s *site, n int) float64 { return s.flood(t, n, 32, 0, false) }},
			benchCase{"rdmanet WriteTo/ReadFrom, unicast, Spin 0 (msgs/s)", size, "ib_send_bw -c UD -e (msgs/s)", true,
				func(t *testing.T, s *site, n int) float64 { return s.flood(t, n, 1, 0, true) }},
			benchCase{"rdmanet batches of 32, unicast, Spin 0 (msgs/s)", size, "ib_send_bw -c UD -e (msgs/s)", true,
				func(t *testing.T, s *site, n int) float64 { return s.flood(t, n, 32, 0, true) }},
			benchCase{"rdmanet WriteTo/ReadFrom, multicast, Spin 2ms (msgs/s)", size, "ib_send_bw -c UD (msgs/s)", true,
				func(t *testing.T, s *site, n int) float64 { return s.flood(t, n, 1, benchSpinRTT, false) }},
			benchCase{"rdmanet batches of 32, multicast, Spin 2ms (msgs/s)", size, "ib_send_bw -c UD (msgs/s)", true,
				func(t *testing.T, s *site, n int) float64 { return s.flood(t, n, 32, benchSpinRTT, false) }},
			benchCase{"rdmanet WriteTo/ReadFrom, unicast, Spin 2ms (msgs/s)", size, "ib_send_bw -c UD (msgs/s)", true,
				func(t *testing.T, s *site, n int) float64 { return s.flood(t, n, 1, benchSpinRTT, true) }},
			benchCase{"rdmanet batches of 32, unicast, Spin 2ms (msgs/s)", size, "ib_send_bw -c UD (msgs/s)", true,
				func(t *testing.T, s *site, n int) float64 { return s.flood(t, n, 32, benchSpinRTT, true) }},
		)
		// What rxe costs over UDP, in C and in Go: perftest over sockperf,
		// and rdmanet's event-driven rows over the Go floor, per round.
		derived = append(derived,
			derivedRow{"ib_send_lat -c UD -e / sockperf (C)", size,
				"ib_send_lat -c UD -e (p50 us)", "sockperf ping-pong, UDP (p50 us)"},
			derivedRow{"rdmanet multicast answer, Spin 0 / net.UDPConn", size,
				"rdmanet ping-pong, multicast answer, Spin 0", "net.UDPConn ping-pong (p50 us)"},
			derivedRow{"rdmanet unicast answer, Spin 0 / net.UDPConn", size,
				"rdmanet ping-pong, unicast answer, Spin 0", "net.UDPConn ping-pong (p50 us)"},
		)
	}
	if only := os.Getenv("RDMANET_TEST_BENCH_ONLY"); only != "" {
		// A regexp of the rows to measure (their baselines are kept).
		re := regexp.MustCompile(only)
		cases = slices.DeleteFunc(cases, func(c benchCase) bool { return c.baseline != "" && !re.MatchString(c.name) })
		kept := map[string]bool{}
		for _, c := range cases {
			kept[c.name] = true
		}
		derived = slices.DeleteFunc(derived, func(d derivedRow) bool { return !kept[d.of] || !kept[d.over] })
	}
	if p := os.Getenv("RDMANET_TEST_BENCH_PROFILE"); p == "1" || p == "both" {
		// A CPU profile of this process (the asking side) over every
		// round, printed base64 as RXEVM-PPROF lines: the VM has no other
		// way out. ("peer" or "both": the rate rows' receivers, in flood.)
		var prof bytes.Buffer
		require.NoError(t, pprof.StartCPUProfile(&prof))
		defer func() {
			pprof.StopCPUProfile()
			printBase64("RXEVM-PPROF", prof.Bytes())
		}()
	}
	key := func(name string, size int) string { return fmt.Sprintf("%s/%d", name, size) }
	vals := map[string][]float64{}
	for round := 1; round <= rounds; round++ {
		fmt.Printf("RXEVM-ROUND %d\n", round)
		for _, c := range cases {
			v := c.run(t, s, c.size)
			vals[key(c.name, c.size)] = append(vals[key(c.name, c.size)], v)
			line := fmt.Sprintf("RXEVM-BENCH round=%d size=%d value=%.2f name=%q", round, c.size, v, c.name)
			if c.baseline != "" {
				b := vals[key(c.baseline, c.size)][round-1]
				line += fmt.Sprintf(" ratio=%.2f", v/b)
			}
			fmt.Println(line)
		}
		for _, d := range derived {
			v := vals[key(d.of, d.size)][round-1] / vals[key(d.over, d.size)][round-1]
			vals[key(d.name, d.size)] = append(vals[key(d.name, d.size)], v)
			fmt.Printf("RXEVM-BENCH round=%d size=%d ratio=%.2f name=%q\n", round, d.size, v, d.name)
		}
	}
	// The tables: one row per measure, its value in each round, and for
	// rdmanet's rows the per-round ratios to the baseline and their median.
	for _, size := range []int{64, 1024} {
		fmt.Printf("RXEVM-TABLE %d B %s, %d rounds\n", size, where(s), rounds)
		hdr := "| " + fmt.Sprint(size) + " B | "
		for r := 1; r <= rounds; r++ {
			hdr += fmt.Sprintf("round %d | ", r)
		}
		fmt.Printf("RXEVM-TABLE %sratio per round | median ratio |\n", hdr)
		for _, c := range cases {
			if c.size != size {
				continue
			}
			v := vals[key(c.name, size)]
			row := "| " + c.name + " | "
			for _, x := range v {
				row += fmtValue(x, c.higher) + " | "
			}
			if c.baseline == "" {
				fmt.Printf("RXEVM-TABLE %s | |\n", row)
				continue
			}
			b := vals[key(c.baseline, size)]
			ratios := make([]float64, len(v))
			var rs []string
			for i := range v {
				ratios[i] = v[i] / b[i]
				rs = append(rs, fmt.Sprintf("%.2fx", ratios[i]))
			}
			fmt.Printf("RXEVM-TABLE %s%s | **%.2fx** |\n", row, strings.Join(rs, " "), perf.Median(ratios))
		}
		for _, d := range derived {
			if d.size != size {
				continue
			}
			v := vals[key(d.name, size)]
			var rs []string
			for _, x := range v {
				rs = append(rs, fmt.Sprintf("%.2fx", x))
			}
			fmt.Printf("RXEVM-TABLE | %s |%s %s | **%.2fx** |\n", d.name, strings.Repeat(" |", len(v)), strings.Join(rs, " "), perf.Median(v))
		}
	}
}

// eagerDrains runs f with both sides' CQ waits in the eager wake-up
// pattern (internal/poller's SetEagerDrain here, envEagerDrain for the
// helpers it starts on the peer): rows beside the current pattern's in
// one run.
func (s *site) eagerDrains(f func() float64) float64 {
	was := poller.SetEagerDrain(true)
	s.helperEnv = []string{envEagerDrain + "=1"}
	defer func() { poller.SetEagerDrain(was); s.helperEnv = nil }()
	return f()
}

func fmtValue(x float64, rate bool) string {
	if rate {
		return fmt.Sprintf("%.1fk", x/1000)
	}
	return fmt.Sprintf("%.1f", x)
}

// where says what the run measured: two VMs, or one VM whose "peer" is
// itself (test/rxevm/init's run_benchmarks1: rxe0 to itself).
func where(s *site) string {
	if s.peer.Equal(s.addr) {
		return "on one host (rxe0 to itself)"
	}
	return "across hosts"
}

// perftestTimeout bounds one perftest client run (a few seconds here).
const perftestTimeout = time.Minute

// perftest runs a perftest tool's server on the peer and its client here,
// and returns the client's and the server's output.
//
// Under TCG perftest's clock calibration sometimes fails ("Correlation
// coefficient r^2: ... < 0.9", "Can't produce a report"), and a UD run
// that lost messages never ends: such a run is repeated, up to three
// times.
func (s *site) perftest(t *testing.T, tool string, args ...string) (client, server string) {
	t.Helper()
	for try := 1; ; try++ {
		client, server, again := s.perftestOnce(t, tool, try < 3, args...)
		if !again {
			return client, server
		}
		fmt.Printf("%s %v: again (try %d)\n", tool, args, try+1)
	}
}

// perftestOnce is one perftest run; with retry, a failed clock
// calibration returns again instead of failing the test.
func (s *site) perftestOnce(t *testing.T, tool string, retry bool, args ...string) (client, server string, again bool) {
	t.Helper()
	base := append([]string{tool, "-d", s.device, "-c", "UD"}, args...)
	_, err := s.agent.Start(peer.StartRequest{Name: tool, Argv: []string{"sh", "-c",
		"exec stdbuf -oL " + strings.Join(base, " ") + " -x $RDMANET_TEST_GID_INDEX"}})
	require.NoError(t, err)
	defer s.agent.Stop(tool)
	r, err := s.agent.Wait(tool, "Waiting for client", 30*time.Second)
	require.NoError(t, err)
	require.True(t, r.Matched, "%s server on b:\n%s", tool, r.Output)
	ctx, cancel := context.WithTimeout(t.Context(), perftestTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "stdbuf", append(append([]string{"-oL"}, base...),
		"-x", s.gidIndex, s.peer.String())...)
	out, err := cmd.CombinedOutput()
	if os.Getenv("RDMANET_TEST_BENCH_DIAG") != "" && cmd.ProcessState != nil {
		var vcs, nvcs int64
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			vcs, nvcs = ru.Nvcsw, ru.Nivcsw
		}
		fmt.Printf("RXEVM-DIAG %s client cpu user=%v sys=%v vcs=%d nvcs=%d (%v)\n", tool, cmd.ProcessState.UserTime(), cmd.ProcessState.SystemTime(), vcs, nvcs, strings.Join(args, " "))
	}
	if retry && err != nil && bytes.Contains(out, []byte("Can't produce a report")) {
		return "", "", true
	}
	if retry && err != nil && ctx.Err() != nil {
		// Now and then a UD ib_send_bw never ends here: its client
		// reports and then waits at the closing handshake, most likely
		// for a server still waiting for messages UD lost (a few times
		// in ~60 runs).
		fmt.Printf("%s %v: no exit within %v, again\n", tool, args, perftestTimeout)
		return "", "", true
	}
	require.NoError(t, err, "%s client:\n%s", tool, out)
	r, err = s.agent.Wait(tool, "", 60*time.Second)
	require.NoError(t, err)
	require.True(t, r.Exited, "%s server on b still running:\n%s", tool, r.Output)
	if retry && r.Code != 0 && strings.Contains(r.Output, "Can't produce a report") {
		return "", "", true
	}
	require.Equal(t, 0, r.Code, "%s server on b:\n%s", tool, r.Output)
	if os.Getenv("RDMANET_TEST_BENCH_DIAG") != "" {
		fmt.Printf("RXEVM-DIAG %s server cpu user=%v sys=%v (%v)\n", tool, r.UserTime, r.SysTime, strings.Join(args, " "))
	}
	return string(out), r.Output, false
}

// resultRow returns the fields of perftest's result row for size.
func resultRow(t *testing.T, out string, size, minFields int) []string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= minFields && f[0] == strconv.Itoa(size) {
			return f
		}
	}
	t.Fatalf("no result row for %d B in:\n%s", size, out)
	return nil
}

// perftestLat: ib_send_lat's t_typical (its median half round trip, µs).
func (s *site) perftestLat(t *testing.T, size int, events bool) float64 {
	args := []string{"-s", strconv.Itoa(size), "-n", strconv.Itoa(benchPingIters)}
	if events {
		args = append(args, "-e")
	}
	// perftest's clock under TCG sometimes gives "inf": measure again.
	for try := 1; ; try++ {
		client, _ := s.perftest(t, "ib_send_lat", args...)
		// #bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%
		f := resultRow(t, client, size, 9)
		v, err := strconv.ParseFloat(f[4], 64)
		require.NoError(t, err, f)
		if (v > 0 && !math.IsInf(v, 0)) || try == 3 {
			return v
		}
		fmt.Printf("ib_send_lat %v: t_typical %q, again\n", args, f[4])
	}
}

// perftestBW: ib_send_bw's message rate at the receiver (the server), in
// msgs/s; with events, both sides sleep on their CQs' completion channels
// (-e), else they poll. Its queues are set to rdmanet's in flood: rx
// depth benchRecvDepth, tx depth benchSendDepth, a completion every
// benchSendDepth/4 sends (perftest's defaults are 512, 128 and 100). The
// depths and moderation perftest reports using are printed
// (RXEVM-PERFTEST lines), as it may clamp them.
func (s *site) perftestBW(t *testing.T, size int, events bool) float64 {
	args := []string{"-s", strconv.Itoa(size), "-n", strconv.Itoa(benchBWIters),
		"--rx-depth", strconv.Itoa(benchRecvDepth), "--tx-depth", strconv.Itoa(benchSendDepth),
		"--cq-mod", strconv.Itoa(benchSendDepth / 4)}
	if events {
		args = append(args, "-e")
	}
	client, server := s.perftest(t, "ib_send_bw", args...)
	for _, so := range [][2]string{{"client", client}, {"server", server}} {
		side, out := so[0], so[1]
		var got []string
		for _, l := range strings.Split(out, "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && (strings.Contains(k, "depth") || strings.Contains(k, "CQ Moderation") || strings.Contains(k, "Mtu")) {
				got = append(got, strings.TrimSpace(k)+"="+strings.TrimSpace(v))
			}
		}
		fmt.Printf("RXEVM-PERFTEST ib_send_bw %s %s: %s\n", strings.Join(args, " "), side, strings.Join(got, ", "))
	}
	if os.Getenv("RDMANET_TEST_BENCH_DIAG") != "" {
		fmt.Printf("RXEVM-DIAG ib_send_bw %s client: %q\n", strings.Join(args, " "), resultRow(t, client, size, 5))
	}
	// #bytes #iterations BW-peak BW-average MsgRate[Mpps]
	f := resultRow(t, server, size, 5)
	v, err := strconv.ParseFloat(f[4], 64)
	require.NoError(t, err, f)
	return v * 1e6
}

var benchGroup byte

// nextGroups returns two fresh groups for one measurement.
func nextGroups() (*net.UDPAddr, *net.UDPAddr) {
	benchGroup += 2
	return &net.UDPAddr{IP: net.IPv4(239, 97, 9, benchGroup)}, &net.UDPAddr{IP: net.IPv4(239, 97, 9, benchGroup+1)}
}

// pingPong: a asks on one group, b's echo answers on a second group or by
// unicast (perf.Pinger); the p50 half round trip in µs (p50us).
func (s *site) pingPong(t *testing.T, size int, unicast bool, spin time.Duration) float64 {
	t.Helper()
	g1, g2 := nextGroups()
	reply := g2.IP.String()
	if unicast {
		reply = "unicast"
	}
	s.helperOnPeer(t, "pong", "echo", "", "-group", g1.IP.String(), "-reply", reply, "-spin", spin.String())
	defer s.agent.Stop("pong")
	spinning := func(lc *rdmanet.ListenConfig) { lc.Spin = spin }
	var c *rdmanet.Conn
	if unicast {
		c = s.listen(t, g1, spinning, func(lc *rdmanet.ListenConfig) { lc.SendOnly = true })
	} else {
		c = s.listen(t, g2, spinning)
		require.NoError(t, c.JoinGroup(nil, g1))
	}
	defer c.Close()
	e := rdmaEndpoint(t, c, g1)
	p := perf.NewPinger(e, e, size, benchPingWait)
	pingTimes(t, p, 50, 50, "warm-up")
	diag := os.Getenv("RDMANET_TEST_BENCH_DIAG") != ""
	var before procThreads
	if diag {
		before = threadSnapshot()
	}
	start := time.Now()
	halves := pingTimes(t, p, benchPingIters, benchPingIters*9/10+1, "measured")
	if diag {
		diagSince(fmt.Sprintf("pingpong-%d-%v-unicast=%v", size, spin, unicast), before, benchPingIters, time.Since(start))
	}
	return p50us(halves)
}

// pingPongSendConns is pingPong's multicast answer with every sender a
// send-only conn of its own: a asks on g1 through one and reads the
// answers on g2 with another, and b's echo answers through a send-only
// conn joined to g2 (-sendconn).
func (s *site) pingPongSendConns(t *testing.T, size int, spin time.Duration) float64 {
	t.Helper()
	g1, g2 := nextGroups()
	s.helperOnPeer(t, "pong", "echo", "", "-group", g1.IP.String(), "-reply", g2.IP.String(),
		"-spin", spin.String(), "-sendconn")
	defer s.agent.Stop("pong")
	c := s.listen(t, g2, func(lc *rdmanet.ListenConfig) { lc.Spin = spin })
	defer c.Close()
	tx := s.listen(t, g1, func(lc *rdmanet.ListenConfig) { lc.SendOnly = true })
	defer tx.Close()
	p := perf.NewPinger(rdmaEndpoint(t, tx, g1), rdmaEndpoint(t, c, nil), size, benchPingWait)
	pingTimes(t, p, 50, 50, "warm-up")
	return p50us(pingTimes(t, p, benchPingIters, benchPingIters*9/10+1, "measured"))
}

// benchPingWait is how long a ping-pong row waits for an answer.
const benchPingWait = 2 * time.Second

// rdmaEndpoint is perf's endpoint over c, sending to to (nil: none).
func rdmaEndpoint(t *testing.T, c *rdmanet.Conn, to net.Addr) *perf.RDMA {
	t.Helper()
	e, err := perf.NewRDMA(c, to)
	require.NoError(t, err)
	return e
}

// pingTimes runs n round trips with p and returns the half round trips
// (ns) of those answered, failing the test when fewer than want were.
func pingTimes(t *testing.T, p *perf.Pinger, n, want int, what string) []int64 {
	t.Helper()
	halves := make([]int64, 0, n)
	for range n {
		half, ok, err := p.RoundTrip()
		require.NoError(t, err, "%s round trip %d", what, p.Seq())
		if ok {
			halves = append(halves, half.Nanoseconds())
		}
	}
	require.GreaterOrEqual(t, len(halves), want, "%s round trips answered within %v, of %d", what, benchPingWait, n)
	return halves
}

// flood: a sends benchBWIters messages flat out (one at a time or in
// batches) to b's group or, with unicast, to b's conn (as ib_send_bw
// does), and b receives them the same way with Spin spin and
// benchRecvDepth receives posted; b's receive rate in msgs/s. The sender
// has SendDepth benchSendDepth; its WriteTo polls the send CQ once a
// write and sleeps on the send CQ's channel only when its ring is full
// (its waiter does not spin, whatever Spin is), where polling
// ib_send_bw's client busy-polls. The loop (perf.Flood) does per call
// what ib_send_bw's does, a post, and besides only writes each message's
// sequence number and the count sent (an error ends it, without
// require's per-call cost).
func (s *site) flood(t *testing.T, size, batch int, spin time.Duration, unicast bool) float64 {
	t.Helper()
	g, _ := nextGroups()
	args := []string{"-group", g.IP.String(), "-batch", strconv.Itoa(batch),
		"-n", strconv.Itoa(benchBWIters), "-idle", "1s", "-depth", strconv.Itoa(benchRecvDepth),
		"-spin", spin.String()}
	// RDMANET_TEST_BENCH_PROFILE=peer: the receiver's CPU profile, one per
	// row and round, as RXEVM-PPROF-PEER lines tagged
	// size-batch-spin-multicast|unicast.
	profile := os.Getenv("RDMANET_TEST_BENCH_PROFILE") == "peer" || os.Getenv("RDMANET_TEST_BENCH_PROFILE") == "both"
	if profile {
		args = append(args, "-cpuprofile")
	}
	ready := s.helperOnPeer(t, "rate", "rate", "", args...)
	c := s.listen(t, g, func(lc *rdmanet.ListenConfig) { lc.SendOnly = true; lc.SendDepth = benchSendDepth })
	defer c.Close()
	// WriteTo to the group as a *net.UDPAddr (the fast path for a stream
	// to one group), WriteBatch to its Addr; unicast to b's conn.
	var dst net.Addr = g
	kind := "multicast"
	if unicast {
		l := ready.Lines("READY")
		require.NotEmpty(t, l)
		to, err := rdmanet.ParseAddr(strings.TrimSpace(strings.TrimPrefix(l[0], "READY")))
		require.NoError(t, err, l[0])
		dst, kind = &to, "unicast"
	}
	var tx perf.Endpoint = rdmaEndpoint(t, c, dst)
	diag := os.Getenv("RDMANET_TEST_BENCH_DIAG") != ""
	var before procThreads
	var tr *bytes.Buffer
	if diag {
		before = threadSnapshot()
		if os.Getenv("RDMANET_TEST_BENCH_DIAG") == "trace" {
			tr = new(bytes.Buffer)
			require.NoError(t, trace.Start(tr))
		}
	}
	// RDMANET_TEST_BENCH_DIAG=hist: how long each write took, summed by
	// bucket (a diagnosis: it adds two clock reads a write).
	var hist []time.Duration
	if os.Getenv("RDMANET_TEST_BENCH_DIAG") == "hist" {
		hist = make([]time.Duration, 0, benchBWIters)
		tx = timedSends{tx, &hist}
	}
	// perf.Flood: per call a post and the sequence numbers, no more.
	f := perf.Flood{Size: size, Batch: batch, Count: benchBWIters}
	var sent atomic.Uint64
	start := time.Now()
	_, _, err := f.Run(tx, &sent)
	if hist != nil {
		printHist(fmt.Sprintf("flood-%d-%d-%v-%s", size, batch, spin, kind), hist, time.Since(start))
	}
	if diag {
		tag := fmt.Sprintf("flood-%d-%d-%v-%s", size, batch, spin, kind)
		diagSince(tag, before, benchBWIters, time.Since(start))
		// The sending host's device counters: a multicast send that rxe
		// also loops back to this host shows in rcvd_pkts.
		fmt.Printf("RXEVM-DIAG %s sender device %v\n", tag, c.Stats().Device)
		if tr != nil {
			// The sender's runtime trace: RXEVM-TRACE lines, base64.
			trace.Stop()
			printBase64("RXEVM-TRACE "+tag, tr.Bytes())
		}
	}
	require.NoError(t, err)
	r := s.waitPeer(t, "rate", 2*time.Minute)
	l := r.Lines("RESULT")
	require.Len(t, l, 1, r.Output)
	v, err := strconv.ParseFloat(field(l[0], "msgs_per_s"), 64)
	require.NoError(t, err, l[0])
	fmt.Printf("flood %d B batch %d spin %v %s: %s\n", size, batch, spin, kind, l[0])
	if diag || hist != nil {
		fmt.Printf("RXEVM-DIAG flood %d B batch %d %s receiver cpu user=%v sys=%v\n", size, batch, kind, r.UserTime, r.SysTime)
		for _, l := range r.Lines("RXEVM-DIAG") {
			fmt.Println(strings.TrimSpace(l))
		}
	}
	if profile {
		tag := fmt.Sprintf("RXEVM-PPROF-PEER %d-%d-%v-%s", size, batch, spin, kind)
		for _, p := range r.Lines("PPROF ") {
			if b, ok := strings.CutPrefix(p, "PPROF "); ok {
				fmt.Println(tag, b)
			}
		}
	}
	return v
}

// timedSends is an endpoint whose send calls each append how long they
// took to *hist.
type timedSends struct {
	perf.Endpoint
	hist *[]time.Duration
}

func (e timedSends) Send(b []byte) error {
	t0 := time.Now()
	err := e.Endpoint.Send(b)
	*e.hist = append(*e.hist, time.Since(t0))
	return err
}

func (e timedSends) SendBatch(bs [][]byte) error {
	t0 := time.Now()
	err := e.Endpoint.SendBatch(bs)
	*e.hist = append(*e.hist, time.Since(t0))
	return err
}

// perfPingPong: the same multicast ping-pong measured by the project's
// own command, `rdmanet perf pingpong`, server on b, client here: a
// cross-check of pingPong's figure.
func (s *site) perfPingPong(t *testing.T, size int) float64 {
	t.Helper()
	g, _ := nextGroups()
	common := []string{"perf", "pingpong", "-backend", rdmanet.BackendRDMACore, "-group", g.IP.String(),
		"-size", strconv.Itoa(size)}
	_, err := s.agent.Start(peer.StartRequest{Name: "perf", Argv: append(append([]string{"rdmanet"}, common...),
		"-role", "server", "-bind", s.peer.String())})
	require.NoError(t, err)
	defer s.agent.Stop("perf")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "rdmanet", append(common, "-role", "client", "-bind", s.addr.String(),
		"-count", strconv.Itoa(benchPingIters), "-json")...).Output()
	require.NoError(t, err, "rdmanet perf pingpong -role client: %s", out)
	var res struct {
		P50Ns int64 `json:"p50_ns"`
	}
	require.NoError(t, json.Unmarshal(out, &res), "%s", out)
	return float64(res.P50Ns) / 1e3
}

// p50us is the median (p50, nearest rank, as `rdmanet perf` reports it)
// of half round trips in ns, in µs: the ping-pong rows' figure, as
// perftest's and sockperf's.
func p50us(halves []int64) float64 {
	return float64(perf.Percentile(perf.Sorted(halves), 50)) / 1e3
}

// sockperfPort is the UDP port of the floor rows' sockperf server and
// echo (on the link's addresses only).
const sockperfPort = 12399

// sockperfPingPong: sockperf's UDP ping-pong, its server on the peer and
// its client here, both blocking in recvfrom (sockperf's default), the
// clock read by clock_gettime as Go's (--no-rdtsc: TCG emulates the
// TSC); its median half round trip (sockperf's "latency"), µs. sockperf
// runs for a time, not a count: 3 s, of which it keeps the middle as
// valid (hundreds to thousands of round trips here).
func (s *site) sockperfPingPong(t *testing.T, size int) float64 {
	t.Helper()
	return s.sockperfClient(t, "ping-pong", size, "percentile 50.000 =")
}

// sockperfSend: sockperf's UDP throughput mode, blocking sends of one
// datagram each as fast as they go for 3 s to a sockperf server on the
// peer; the sender's rate (its "Message Rate"), msgs/s.
func (s *site) sockperfSend(t *testing.T, size int) float64 {
	t.Helper()
	return s.sockperfClient(t, "throughput", size, "Summary: Message Rate is")
}

// sockperfClient runs a sockperf server on the peer and the client in mode
// here, and returns the number after key in the client's output.
func (s *site) sockperfClient(t *testing.T, mode string, size int, key string) float64 {
	t.Helper()
	s.sockperfServer(t)
	defer s.agent.Stop("sockperf")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "sockperf", mode, "-i", s.peer.String(), "-p", strconv.Itoa(sockperfPort),
		"-m", strconv.Itoa(size), "-t", "3", "--no-rdtsc").CombinedOutput()
	require.NoError(t, err, "sockperf %s:\n%s", mode, out)
	for _, l := range strings.Split(string(out), "\n") {
		if _, v, ok := strings.Cut(l, key); ok {
			f := strings.Fields(v)
			require.NotEmpty(t, f, l)
			x, err := strconv.ParseFloat(f[0], 64)
			require.NoError(t, err, l)
			return x
		}
	}
	t.Fatalf("no %q in sockperf's output:\n%s", key, out)
	return 0
}

// sockperfServer starts sockperf's server on the peer, on the link's
// address and sockperfPort (stopped by the caller).
func (s *site) sockperfServer(t *testing.T) {
	t.Helper()
	_, err := s.agent.Start(peer.StartRequest{Name: "sockperf", Argv: []string{"stdbuf", "-oL",
		"sockperf", "server", "-i", s.peer.String(), "-p", strconv.Itoa(sockperfPort)}})
	require.NoError(t, err)
	r, err := s.agent.Wait("sockperf", "to block on socket", 30*time.Second)
	require.NoError(t, err)
	require.True(t, r.Matched, "sockperf server on b:\n%s", r.Output)
}

// udpSend: a connected net.UDPConn's Write of one datagram a call, as fast
// as it goes for benchBWIters*5 datagrams, to the sockperf server on the
// peer (sockperf's throughput client does the same in C); the sender's
// rate, msgs/s. (The payload is not sockperf's header: its server counts
// and drops it.)
func (s *site) udpSend(t *testing.T, size int) float64 {
	t.Helper()
	s.sockperfServer(t)
	defer s.agent.Stop("sockperf")
	c, err := net.DialUDP("udp4", &net.UDPAddr{IP: s.addr}, &net.UDPAddr{IP: s.peer, Port: sockperfPort})
	require.NoError(t, err)
	defer c.Close()
	b := make([]byte, size)
	n := benchBWIters * 5
	diag := os.Getenv("RDMANET_TEST_BENCH_DIAG") != ""
	var before procThreads
	if diag {
		before = threadSnapshot()
	}
	start := time.Now()
	for i := 0; i < n; i++ {
		if _, err = c.Write(b); err != nil {
			break
		}
	}
	el := time.Since(start)
	if diag {
		diagSince(fmt.Sprintf("udpsend-%d", size), before, n, el)
	}
	require.NoError(t, err)
	return float64(n) / el.Seconds()
}

// udpPingPong: the same ping-pong as a Go program writes it without
// rdmanet: a connected net.UDPConn here, the udpecho role's net.UDPConn
// on the peer, both in the netpoller; the p50 half round trip (p50us), µs.
func (s *site) udpPingPong(t *testing.T, size int) float64 {
	t.Helper()
	ready := s.helperOnPeer(t, "udpecho", "udpecho", "", "-bind", s.peer.String())
	defer s.agent.Stop("udpecho")
	l := ready.Lines("READY")
	require.NotEmpty(t, l)
	port, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(l[0], "READY")))
	require.NoError(t, err, l[0])
	c, err := net.DialUDP("udp4", &net.UDPAddr{IP: s.addr}, &net.UDPAddr{IP: s.peer, Port: port})
	require.NoError(t, err)
	defer c.Close()
	e := perf.NewUDP(c, nil, true)
	p := perf.NewPinger(e, e, size, benchPingWait)
	pingTimes(t, p, 50, 50, "warm-up")
	return p50us(pingTimes(t, p, benchPingIters, benchPingIters, "measured"))
}

// printHist prints a RXEVM-HIST line: the calls' quantiles and how much of
// the wall time calls of each size took.
func printHist(tag string, d []time.Duration, wall time.Duration) {
	slices.Sort(d)
	ns := make([]int64, len(d))
	for i, x := range d {
		ns[i] = int64(x)
	}
	q := func(f float64) time.Duration { return time.Duration(perf.Percentile(ns, 100*f)) }
	var sum, over100us, over1ms time.Duration
	var n100, n1ms int
	for _, x := range d {
		sum += x
		if x > 100*time.Microsecond {
			over100us += x
			n100++
		}
		if x > time.Millisecond {
			over1ms += x
			n1ms++
		}
	}
	fmt.Printf("RXEVM-HIST %s n=%d wall=%v in_calls=%v p50=%v p90=%v p99=%v p99.9=%v max=%v over100us=%d/%v over1ms=%d/%v\n",
		tag, len(d), wall.Round(time.Millisecond), sum.Round(time.Millisecond), q(0.5), q(0.9), q(0.99), q(0.999), d[len(d)-1],
		n100, over100us.Round(time.Millisecond), n1ms, over1ms.Round(time.Millisecond))
}

// printClock prints the guest's clocksource and what a time.Now costs
// here (a spin window reads the clock on every poll).
func printClock() {
	cur, _ := os.ReadFile("/sys/devices/system/clocksource/clocksource0/current_clocksource")
	avail, _ := os.ReadFile("/sys/devices/system/clocksource/clocksource0/available_clocksource")
	const n = 20000
	start := time.Now()
	for i := 0; i < n; i++ {
		_ = time.Now()
	}
	fmt.Printf("RXEVM-CLOCK clocksource=%s available=%q time.Now=%v\n",
		strings.TrimSpace(string(cur)), strings.TrimSpace(string(avail)), time.Since(start)/n)
}
