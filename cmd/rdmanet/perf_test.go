//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/perf"
	"github.com/go-rdma/rdmanet/internal/testenv"
)

// ---- the histogram as text, the formatters (the tallies are internal/perf's) ----

func TestWriteHistogram(t *testing.T) {
	var b bytes.Buffer
	writeHistogram(&b, perf.Histogram([]int64{10_000, 12_000, 12_500, 40_000}), 10)
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	require.Len(t, lines, 3)
	assert.Regexp(t, `^  8\.19µs - 16\.4µs\s+\|##########\|\s+3\s+75\.00%$`, lines[0])
	assert.Regexp(t, `^  16\.4µs - 32\.8µs\s+\|          \|\s+0\s+75\.00%$`, lines[1])
	assert.Regexp(t, `^  32\.8µs - 65\.5µs\s+\|###       \|\s+1\s+100\.00%$`, lines[2])
}

func TestFormatters(t *testing.T) {
	for ns, want := range map[int64]string{0: "0ns", 999: "999ns", 1000: "1.00µs", 15_300: "15.3µs",
		262_144: "262µs", 2_040_000: "2.04ms", 3_000_000_000: "3.00s"} {
		assert.Equal(t, want, fmtDur(ns), "%d ns", ns)
	}
	assert.Equal(t, "950", fmtCount(950))
	assert.Equal(t, "71.7k", fmtCount(71_700))
	assert.Equal(t, "1.20M", fmtCount(1_200_000))
}

// ---- runs on loopback ----

var perfGroupN atomic.Uint32

// perfGroup returns a fresh group for a test (pingpong uses it and the
// next address), distinct per process and per call.
func perfGroup() string {
	n := perfGroupN.Add(1)
	return fmt.Sprintf("239.78.%d.%d", os.Getpid()%250, 2*n)
}

func runPerfJSON(t *testing.T, args ...string) perfResult {
	t.Helper()
	out, errOut, code := runCmd(t, "/", append([]string{"perf"}, append(args, "-json", "-group", perfGroup())...)...)
	require.Equal(t, 0, code, "stderr: %s", errOut)
	var r perfResult
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&r), "stdout: %s", out)
	assert.False(t, dec.More(), "one JSON object only: %s", out)
	return r
}

func checkLatency(t *testing.T, r perfResult, count int) {
	t.Helper()
	assert.Equal(t, "pingpong", r.Mode)
	assert.Equal(t, uint64(count), r.Count+r.Lost)
	assert.Zero(t, r.Lost, "no round trip lost on loopback")
	assert.Greater(t, r.P50Ns, int64(0))
	assert.LessOrEqual(t, r.MinNs, r.P50Ns)
	assert.LessOrEqual(t, r.P50Ns, r.P90Ns)
	assert.LessOrEqual(t, r.P90Ns, r.P99Ns)
	assert.LessOrEqual(t, r.P99Ns, r.P999Ns)
	assert.LessOrEqual(t, r.P999Ns, r.MaxNs)
	assert.Less(t, r.P50Ns, int64(50*time.Millisecond), "a loopback round trip")
	total := 0
	for _, b := range r.Histogram {
		total += b.Count
	}
	assert.Equal(t, int(r.Count), total, "histogram holds every sample")
	assert.Greater(t, r.MsgsPerS, 0.0)
	assert.Greater(t, r.Duration, 0.0)
	assert.Greater(t, r.CPUPct, 0.0)
}

func checkThroughput(t *testing.T, r perfResult, count, receivers int) {
	t.Helper()
	assert.Equal(t, "throughput", r.Mode)
	assert.Equal(t, uint64(count), r.Count)
	require.Len(t, r.Receivers, receivers)
	require.Len(t, r.LossPct, receivers)
	for i, rc := range r.Receivers {
		assert.Equal(t, uint64(count), rc.Expected)
		assert.LessOrEqual(t, rc.Received, rc.Expected)
		assert.GreaterOrEqual(t, rc.LossPct, 0.0)
		assert.LessOrEqual(t, rc.LossPct, 100.0)
		assert.InDelta(t, 100*float64(rc.Expected-rc.Received)/float64(rc.Expected), rc.LossPct, 1e-9)
		assert.Equal(t, rc.LossPct, r.LossPct[i])
		assert.Greater(t, rc.Received, uint64(0), "receiver %d got something", i+1)
		assert.Zero(t, rc.Bad)
	}
	assert.Greater(t, r.MsgsPerS, 0.0)
	assert.Greater(t, r.SendPerS, 0.0)
	assert.InDelta(t, r.MsgsPerS*float64(r.Size*8)/1e9, r.GbitPerS, 1e-9)
}

func TestPerfPingPong(t *testing.T) {
	softwareHere(t)
	for _, tc := range []struct {
		name string
		args []string
		be   string
	}{
		{"software", []string{"-backend", "software"}, "software"},
		{"software 1KiB spin", []string{"-backend", "software", "-size", "1024", "-spin", "20us"}, "software"},
		{"software member", []string{"-backend", "software", "-sender", "member"}, "software"},
		{"udp", []string{"-baseline", "udp"}, "udp"},
		{"udp unconnected", []string{"-baseline", "udp", "-sender", "unconnected"}, "udp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runPerfJSON(t, append([]string{"pingpong", "-count", "300"}, tc.args...)...)
			checkLatency(t, r, 300)
			assert.Equal(t, tc.be, r.Backend)
			checkSender(t, r, tc.args)
			assert.Contains(t, r.Device, "lo", "loopback unless told otherwise")
			assert.Equal(t, "both", r.Role)
			if tc.be == "udp" {
				assert.Equal(t, "udp", r.Baseline)
			}
		})
	}
}

func TestPerfThroughput(t *testing.T) {
	softwareHere(t)
	for _, tc := range []struct {
		name      string
		args      []string
		receivers int
		be        string
	}{
		{"software", []string{"-backend", "software"}, 1, "software"},
		{"software batch 2 receivers", []string{"-backend", "software", "-batch", "32", "-receivers", "2", "-size", "1024"}, 2, "software"},
		{"udp", []string{"-baseline", "udp"}, 1, "udp"},
		{"udp batch 2 receivers", []string{"-baseline", "udp", "-batch", "16", "-receivers", "2"}, 2, "udp"},
		{"udp default rcvbuf", []string{"-baseline", "udp", "-rcvbuf", "0"}, 1, "udp"},
		{"software member", []string{"-backend", "software", "-sender", "member"}, 1, "software"},
		{"udp unconnected", []string{"-baseline", "udp", "-sender", "unconnected"}, 1, "udp"},
		{"udp connected batch", []string{"-baseline", "udp", "-sender", "connected", "-batch", "8"}, 1, "udp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runPerfJSON(t, append([]string{"throughput", "-count", "3000", "-rate", "100000"}, tc.args...)...)
			checkThroughput(t, r, 3000, tc.receivers)
			assert.Equal(t, tc.be, r.Backend)
			checkSender(t, r, tc.args)
		})
	}
}

// checkSender checks the run reports the sender it was given, or the
// default: send-only for rdmanet, connected for the UDP baseline.
func checkSender(t *testing.T, r perfResult, args []string) {
	t.Helper()
	want := "send-only"
	if r.Baseline == "udp" {
		want = "connected"
	}
	for i, a := range args {
		if a == "-sender" {
			want = args[i+1]
		}
	}
	assert.Equal(t, want, r.Sender)
	assert.Greater(t, r.RcvBuf, 0, "a receiver's socket buffer is reported")
	assert.Greater(t, r.RmemMax, 0)
}

// The UDP baseline's receivers get the receive buffer the software
// backend's sockets get, as the kernel grants it; -rcvbuf 0 leaves the
// system default, which is smaller here.
func TestPerfRcvBufEqual(t *testing.T) {
	softwareHere(t)
	sw := runPerfJSON(t, "throughput", "-backend", "software", "-count", "1000", "-rate", "100000")
	udp := runPerfJSON(t, "throughput", "-baseline", "udp", "-count", "1000", "-rate", "100000")
	assert.Equal(t, sw.RcvBuf, udp.RcvBuf, "rdmanet's and UDP's receivers get the same SO_RCVBUF")
	assert.LessOrEqual(t, udp.RcvBuf, 2*perf.SocketBuffer)
	def := runPerfJSON(t, "throughput", "-baseline", "udp", "-rcvbuf", "0", "-count", "1000", "-rate", "100000")
	if udp.RmemMax >= perf.SocketBuffer {
		assert.Equal(t, 2*perf.SocketBuffer, udp.RcvBuf, "granted in full under rmem_max %d", udp.RmemMax)
		assert.Less(t, def.RcvBuf, udp.RcvBuf, "the system default is smaller than 4 MiB")
	}
}

// The connected UDP sender is connected: its socket has a peer, the
// group, and it reaches a receiver on loopback.
func TestPerfUDPConnectedSender(t *testing.T) {
	for _, tc := range []struct {
		sender string
		peer   bool
	}{{"", true}, {senderConnected, true}, {senderUnconnected, false}} {
		t.Run(tc.sender, func(t *testing.T) {
			c := &perfConfig{baseline: "udp", batch: 1, sender: tc.sender}
			pn := &perfNet{cfg: c}
			g := &net.UDPAddr{IP: net.ParseIP(perfGroup()), Port: 32000 + os.Getpid()%1000}
			rx, err := pn.receiver(g)
			require.NoError(t, err)
			defer rx.Close()
			tx, err := pn.sender(g)
			require.NoError(t, err)
			defer tx.Close()
			ra := tx.(*perf.UDP).C.RemoteAddr()
			if tc.peer {
				require.NotNil(t, ra)
				assert.Equal(t, g.String(), ra.String())
			} else {
				assert.Nil(t, ra)
			}
			require.NoError(t, tx.Send([]byte("to the group")))
			require.NoError(t, tx.SendBatch([][]byte{[]byte("batch 1"), []byte("batch 2")}))
			buf := make([]byte, 64)
			require.NoError(t, rx.SetReadDeadline(time.Now().Add(2*time.Second)))
			for _, want := range []string{"to the group", "batch 1", "batch 2"} {
				n, err := rx.Recv(buf)
				require.NoError(t, err)
				assert.Equal(t, want, string(buf[:n]))
			}
		})
	}
}

// -rate paces the sender: 2000 messages at 20k/s take at least 0.1 s
// (more on a loaded machine: pacing only holds the sender back).
func TestPerfRate(t *testing.T) {
	softwareHere(t)
	r := runPerfJSON(t, "throughput", "-backend", "software", "-count", "2000", "-rate", "20000")
	checkThroughput(t, r, 2000, 1)
	assert.GreaterOrEqual(t, r.Duration, 0.095)
	assert.LessOrEqual(t, r.SendPerS, 20000*1.02)
	assert.Equal(t, 20000.0, r.Rate)
}

func TestPerfDuration(t *testing.T) {
	softwareHere(t)
	r := runPerfJSON(t, "pingpong", "-backend", "software", "-duration", "150ms")
	assert.GreaterOrEqual(t, r.Duration, 0.15)
	assert.Less(t, r.Duration, 2.0)
	assert.Greater(t, r.Count, uint64(10))
	checkLatency(t, r, int(r.Count))

	r = runPerfJSON(t, "throughput", "-baseline", "udp", "-duration", "150ms", "-rate", "50000")
	assert.GreaterOrEqual(t, r.Duration, 0.15)
	assert.Greater(t, r.Count, uint64(1000))
	checkThroughput(t, r, int(r.Count), 1)
}

func TestPerfTextOutput(t *testing.T) {
	softwareHere(t)
	out, errOut, code := runCmd(t, "/", "perf", "pingpong", "-backend", "software", "-count", "200", "-group", perfGroup())
	require.Equal(t, 0, code, errOut)
	for _, re := range []string{`(?m)^mode\s+pingpong \(both\)$`, `(?m)^backend\s+software$`, `(?m)^sender\s+send-only$`,
		`(?m)^rcvbuf\s+\d+ B \(getsockopt SO_RCVBUF: twice the grant\); net\.core\.rmem_max \d+$`, `(?m)^round trips\s+200 \(0 lost\)$`,
		`(?m)^  p50\s+\d`, `(?m)^  p99\.9\s+\d`, `(?m)^  max\s+\d`, `(?m)^cpu\s+\d+%`, `(?m)\|#+ *\|\s+\d+\s+100\.00%$`} {
		assert.Regexp(t, regexp.MustCompile(re), out)
	}
	assert.Empty(t, errOut, "short runs print no progress")
	for i, l := range strings.Split(out, "\n") {
		assert.False(t, strings.HasSuffix(l, " "), "line %d has trailing spaces: %q", i+1, l)
	}

	out, errOut, code = runCmd(t, "/", "perf", "throughput", "-baseline", "udp", "-count", "1000", "-rate", "50000", "-group", perfGroup())
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `(?m)^backend\s+net\.UDPConn multicast \(baseline udp\)$`, out)
	assert.Regexp(t, `(?m)^sender\s+connected$`, out)
	assert.Regexp(t, `(?m)^receiver\s+received\s+expected\s+loss\s+msgs/s\s+Gbit/s$`, out)
	assert.Regexp(t, `(?m)^1\s+\d+\s+1000\s+\d+\.\d{3}%`, out)
}

// Progress lines come on stderr once a run passes 2 s.
func TestPerfProgress(t *testing.T) {
	softwareHere(t)
	if testing.Short() {
		t.Skip("a 2.3 s run")
	}
	_, errOut, code := runCmd(t, "/", "perf", "throughput", "-backend", "software", "-duration", "2300ms", "-rate", "20000",
		"-progress", "100ms", "-json", "-group", perfGroup())
	require.Equal(t, 0, code, errOut)
	// The rate is 20k/s when the machine keeps up, under 10k ("3600/s",
	// fmtCount) on a loaded one: the line's form is what is checked.
	assert.Regexp(t, `(?m)^perf throughput:\s+2\.\d+s  sent \d+ \(([0-9.]+k|\d+)/s\)  rx1 \d+$`, errOut)
	assert.NotContains(t, errOut, " 1.9s", "nothing before 2 s")
}

// The split roles, two "processes" in one: a server and a client, a
// receiver and a sender.
func TestPerfRoles(t *testing.T) {
	softwareHere(t)
	for _, be := range [][]string{{"-backend", "software"}, {"-baseline", "udp"}} {
		t.Run("pingpong"+be[1], func(t *testing.T) {
			g := perfGroup()
			var wg sync.WaitGroup
			var srvOut, srvErr string
			var srvCode int
			wg.Go(func() {
				srvOut, srvErr, srvCode = runCmd(t, "/", append([]string{"perf", "pingpong", "-role", "server", "-group", g, "-json"}, be...)...)
			})
			out, errOut, code := runCmd(t, "/", append([]string{"perf", "pingpong", "-role", "client", "-count", "200", "-group", g, "-json"}, be...)...)
			require.Equal(t, 0, code, errOut)
			wg.Wait() // the client's end markers stop the server
			require.Equal(t, 0, srvCode, srvErr)
			var c, s perfResult
			require.NoError(t, json.Unmarshal([]byte(out), &c))
			require.NoError(t, json.Unmarshal([]byte(srvOut), &s))
			assert.Equal(t, "client", c.Role)
			checkLatency(t, c, 200)
			assert.Equal(t, "server", s.Role)
			// The server answered the first-contact, warm-up and measured round trips.
			assert.GreaterOrEqual(t, s.Count, uint64(300))
			assert.Contains(t, srvErr, "waiting for a client")
		})
		t.Run("throughput"+be[1], func(t *testing.T) {
			g := perfGroup()
			var wg sync.WaitGroup
			var rxOut, rxErr string
			var rxCode int
			wg.Go(func() {
				rxOut, rxErr, rxCode = runCmd(t, "/", append([]string{"perf", "throughput", "-role", "recv", "-receivers", "2", "-group", g, "-json"}, be...)...)
			})
			// No handshake: give the receivers time to join.
			time.Sleep(300 * time.Millisecond)
			out, errOut, code := runCmd(t, "/", append([]string{"perf", "throughput", "-role", "send", "-count", "2000", "-rate", "50000", "-group", g, "-json"}, be...)...)
			require.Equal(t, 0, code, errOut)
			wg.Wait()
			require.Equal(t, 0, rxCode, rxErr)
			var s, r perfResult
			require.NoError(t, json.Unmarshal([]byte(out), &s))
			require.NoError(t, json.Unmarshal([]byte(rxOut), &r))
			assert.Equal(t, uint64(2000), s.Count)
			assert.Empty(t, s.Receivers)
			assert.Equal(t, "recv", r.Role)
			checkThroughput(t, perfResult{Mode: r.Mode, Count: r.Count, Receivers: r.Receivers, LossPct: r.LossPct,
				MsgsPerS: r.MsgsPerS, SendPerS: 1, GbitPerS: r.GbitPerS, Size: r.Size}, 2000, 2)
		})
	}
}

func TestPerfBadFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no mode", nil, "no mode given"},
		{"unknown mode", []string{"frob"}, `unknown mode "frob"`},
		{"two modes", []string{"pingpong", "throughput"}, `unexpected argument "throughput"`},
		{"size too small", []string{"pingpong", "-size", "4"}, "bad -size 4"},
		{"size too big", []string{"throughput", "-size", "70000"}, "bad -size 70000"},
		{"size over MTU", []string{"pingpong", "-backend", "software", "-size", "9000"}, "larger than the MTU"},
		{"count and duration", []string{"pingpong", "-count", "5", "-duration", "1s"}, "-count and -duration exclude each other"},
		{"count zero", []string{"throughput", "-count", "0"}, "bad -count 0"},
		{"negative duration", []string{"throughput", "-duration", "-1s"}, "bad -duration"},
		{"backend", []string{"pingpong", "-backend", "verbs"}, `bad -backend "verbs"`},
		{"baseline", []string{"pingpong", "-baseline", "tcp"}, `bad -baseline "tcp"`},
		{"baseline and backend", []string{"pingpong", "-baseline", "udp", "-backend", "software"}, "drop -backend"},
		{"baseline and spin", []string{"pingpong", "-baseline", "udp", "-spin", "10us"}, "-spin, -device and -depth apply to rdmanet"},
		{"pingpong role", []string{"pingpong", "-role", "send"}, `bad -role "send"`},
		{"throughput role", []string{"throughput", "-role", "server"}, `bad -role "server"`},
		{"pingpong batch", []string{"pingpong", "-batch", "8"}, "-batch applies to throughput only"},
		{"pingpong receivers", []string{"pingpong", "-receivers", "2"}, "-receivers applies to throughput only"},
		{"pingpong rate", []string{"pingpong", "-rate", "10"}, "-rate applies to throughput only"},
		{"batch zero", []string{"throughput", "-batch", "0"}, "bad -batch 0"},
		{"receivers zero", []string{"throughput", "-receivers", "0"}, "bad -receivers 0"},
		{"send receivers", []string{"throughput", "-role", "send", "-receivers", "2"}, "-receivers does not apply to -role send"},
		{"negative rate", []string{"throughput", "-rate", "-5"}, "bad -rate"},
		{"negative spin", []string{"pingpong", "-spin", "-1us"}, "bad -spin"},
		{"rcvbuf without baseline", []string{"throughput", "-rcvbuf", "65536"}, "-rcvbuf applies to -baseline udp"},
		{"negative rcvbuf", []string{"throughput", "-baseline", "udp", "-rcvbuf", "-1"}, "bad -rcvbuf -1"},
		{"udp sender for rdmanet", []string{"pingpong", "-sender", "connected"}, `bad -sender "connected": rdmanet takes send-only or member`},
		{"rdmanet sender for udp", []string{"throughput", "-baseline", "udp", "-sender", "member"}, `bad -sender "member": -baseline udp takes connected or unconnected`},
		{"unknown sender", []string{"throughput", "-sender", "dial"}, `bad -sender "dial"`},
		{"recv sender", []string{"throughput", "-role", "recv", "-sender", "member"}, "-sender does not apply to -role recv"},
		{"group unicast", []string{"pingpong", "-group", "10.0.0.1"}, "not a multicast address"},
		{"group v6", []string{"pingpong", "-group", "ff02::1"}, "want an IPv4 multicast address"},
		{"group garbage", []string{"pingpong", "-group", "bogus"}, `bad -group "bogus"`},
		{"group no next", []string{"pingpong", "-group", "239.255.255.255"}, "not multicast"},
		{"bind", []string{"pingpong", "-bind", "fe80::1"}, `bad -bind "fe80::1"`},
		{"iface", []string{"pingpong", "-iface", "nosuch0"}, `bad -iface "nosuch0"`},
		{"unknown flag", []string{"pingpong", "-frob"}, "flag provided but not defined: -frob"},
		{"bad duration syntax", []string{"pingpong", "-duration", "soon"}, `invalid value "soon"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "size over MTU" {
				softwareHere(t) // it opens a software conn to learn the MTU
			}
			out, errOut, code := runCmd(t, "/", append([]string{"perf"}, tc.args...)...)
			assert.Equal(t, 2, code, "stderr: %s", errOut)
			assert.Empty(t, out, "bad input prints nothing on stdout")
			assert.Contains(t, errOut, tc.want)
		})
	}
}

func TestPerfHelp(t *testing.T) {
	_, errOut, code := runCmd(t, "/", "perf", "-h")
	assert.Equal(t, 0, code)
	for _, f := range []string{"-size", "-count", "-duration", "-backend", "-baseline", "-iface", "-bind", "-group",
		"-role", "-batch", "-spin", "-receivers", "-rate", "-json", "-progress", "-sender", "-rcvbuf"} {
		assert.Contains(t, errOut, f)
	}
}

// TestPerfDevice runs the throughput test over a real RDMA device (rxe in
// the test VM: make test-rxe). No testenv.Device skips; one named but
// missing fails.
// softwareHere skips tests of the software backend on loopback inside the
// Soft-RoCE VM, where rxe holds UDP port 4791 in this namespace; they run
// in every `go test ./...` outside it.
func softwareHere(t *testing.T) {
	t.Helper()
	if testenv.Device() != "" {
		t.Skip("software backend on loopback: runs outside the rxe VM, where rxe holds UDP 4791")
	}
}

func TestPerfDevice(t *testing.T) {
	testenv.NeedDevice(t) // skips without a device, fails when it is missing
	dev, addr := testenv.Device(), testenv.Addr()
	for _, size := range []string{"64", "1024"} {
		r := runPerfJSON(t, "throughput", "-backend", "rdma-core", "-device", dev, "-bind", addr, "-size", size,
			"-count", "20000", "-progress", "0")
		assert.Equal(t, "rdma-core", r.Backend)
		assert.Contains(t, r.Device, dev)
		checkThroughput(t, r, 20000, 1)
		t.Logf("RDMANET-PERF rdma-core throughput size=%s msgs_per_s=%.0f send_msgs_per_s=%.0f loss_pct=%.3f cpu_pct=%.0f",
			size, r.MsgsPerS, r.SendPerS, r.LossPct[0], r.CPUPct)
		p := runPerfJSON(t, "pingpong", "-backend", "rdma-core", "-device", dev, "-bind", addr, "-size", size,
			"-count", "1000", "-progress", "0")
		checkLatency(t, p, 1000)
		t.Logf("RDMANET-PERF rdma-core pingpong size=%s p50_ns=%d p99_ns=%d max_ns=%d", size, p.P50Ns, p.P99Ns, p.MaxNs)
	}
}

// The UDP baseline's receivers see only their own group, even with another
// group on the same port joined in the process: ping-pong's client must
// not read its own requests as answers.
func TestPerfUDPReceiverOnlyItsGroup(t *testing.T) {
	c := &perfConfig{baseline: "udp", batch: 1}
	pn := &perfNet{cfg: c}
	port := 31000 + os.Getpid()%1000
	g1 := &net.UDPAddr{IP: net.ParseIP(perfGroup()), Port: port}
	g2 := &net.UDPAddr{IP: net.ParseIP(perfGroup()), Port: port}
	r1, err := pn.receiver(g1)
	require.NoError(t, err)
	defer r1.Close()
	r2, err := pn.receiver(g2)
	require.NoError(t, err)
	defer r2.Close()
	tx, err := pn.sender(g1)
	require.NoError(t, err)
	defer tx.Close()
	require.NoError(t, tx.Send([]byte("for group 1 only")))
	buf := make([]byte, 64)
	require.NoError(t, r1.SetReadDeadline(time.Now().Add(2*time.Second)))
	n, err := r1.Recv(buf)
	require.NoError(t, err)
	require.Equal(t, "for group 1 only", string(buf[:n]))
	require.NoError(t, r2.SetReadDeadline(time.Now().Add(100*time.Millisecond)))
	n, err = r2.Recv(buf)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "group 2's receiver got %q", buf[:n])
}
