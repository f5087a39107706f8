//go:build linux

package twohost

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-rdma/rdmanet/rdmanet"
	"github.com/go-rdma/rdmanet/test/rxevm/peer"
	"github.com/stretchr/testify/require"
)

// procThreads is a snapshot of this process's threads: CPU ticks (user,
// system) and context switches (voluntary, involuntary), from /proc.
type procThreads map[string][4]int64

func threadSnapshot() procThreads {
	snap := procThreads{}
	dirs, _ := filepath.Glob("/proc/self/task/*")
	for _, d := range dirs {
		var v [4]int64
		if b, err := os.ReadFile(d + "/stat"); err == nil {
			s := string(b)
			if i := strings.LastIndexByte(s, ')'); i > 0 {
				f := strings.Fields(s[i+2:])
				if len(f) > 13 {
					v[0], _ = strconv.ParseInt(f[11], 10, 64)
					v[1], _ = strconv.ParseInt(f[12], 10, 64)
				}
			}
		}
		if b, err := os.ReadFile(d + "/status"); err == nil {
			for _, l := range strings.Split(string(b), "\n") {
				if k, val, ok := strings.Cut(l, ":"); ok {
					n, _ := strconv.ParseInt(strings.TrimSpace(val), 10, 64)
					switch k {
					case "voluntary_ctxt_switches":
						v[2] = n
					case "nonvoluntary_ctxt_switches":
						v[3] = n
					}
				}
			}
		}
		snap[filepath.Base(d)] = v
	}
	return snap
}

// diagSince prints, per thread, what it used since before: CPU ticks
// (user+system, 100 Hz) and context switches, and the totals.
func diagSince(tag string, before procThreads, n int, wall time.Duration) {
	after := threadSnapshot()
	var tot [4]int64
	var parts []string
	for tid, a := range after {
		b := before[tid]
		d := [4]int64{a[0] - b[0], a[1] - b[1], a[2] - b[2], a[3] - b[3]}
		if d == ([4]int64{}) {
			continue
		}
		for i := range tot {
			tot[i] += d[i]
		}
		parts = append(parts, fmt.Sprintf("%s:u%d/s%d/v%d/nv%d", tid, d[0], d[1], d[2], d[3]))
	}
	fmt.Printf("RXEVM-DIAG %s n=%d wall=%v send_rate=%.0f cpu_ticks=u%d/s%d vcs/msg=%.3f nvcs/msg=%.3f threads=%d [%s]\n",
		tag, n, wall.Round(time.Millisecond), float64(n)/wall.Seconds(), tot[0], tot[1],
		float64(tot[2])/float64(n), float64(tot[3])/float64(n), len(after), strings.Join(parts, " "))
}

// TestDiagStrace (RDMANET_TEST_DIAG_STRACE=1, with strace in the VMs:
// RXEVM_EXTRA_BINS=strace) traces a short event-driven ping-pong on both
// hosts, perftest's (`ib_send_lat -e`) and rdmanet's (`rdmanet perf
// pingpong`), and prints the end of each trace: the system calls of one
// round trip and their times, side by side.
func TestDiagStrace(t *testing.T) {
	if os.Getenv("RDMANET_TEST_DIAG_STRACE") == "" {
		t.Skip("RDMANET_TEST_DIAG_STRACE not set")
	}
	s := needPeer(t)
	tail := func(tag, out string) {
		l := strings.Split(strings.TrimSpace(out), "\n")
		if len(l) > 4000 {
			l = l[len(l)-4000:]
		}
		for _, x := range l {
			fmt.Printf("RXEVM-STRACE %s %s\n", tag, x)
		}
	}
	trace := []string{"strace", "-f", "-tt", "-T", "-o"}
	run := func(tag string, server, client []string, ready string) {
		// A shell on b, for b's own $RDMANET_TEST_GID_INDEX.
		_, err := s.agent.Start(peer.StartRequest{Name: tag, Argv: []string{"sh", "-c",
			"exec " + strings.Join(trace, " ") + " /tmp/strace." + tag + " " + strings.Join(server, " ")}})
		require.NoError(t, err)
		if ready != "" {
			r, err := s.agent.Wait(tag, ready, 60*time.Second)
			require.NoError(t, err)
			require.True(t, r.Matched, "%s server: %s", tag, r.Output)
		} else {
			time.Sleep(5 * time.Second) // rdmanet perf's server says nothing
		}
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, trace[0], append(append(append([]string{}, trace[1:]...), "/tmp/strace."+tag+".a"), client...)...).CombinedOutput()
		require.NoError(t, err, "%s client: %s", tag, out)
		s.agent.Wait(tag, "", 30*time.Second)
		s.agent.Stop(tag)
		a, err := os.ReadFile("/tmp/strace." + tag + ".a")
		require.NoError(t, err)
		tail(tag+"-a", string(a))
		_, err = s.agent.Start(peer.StartRequest{Name: "cat", Argv: []string{"cat", "/tmp/strace." + tag}})
		require.NoError(t, err)
		r, err := s.agent.Wait("cat", "", 30*time.Second)
		require.NoError(t, err)
		tail(tag+"-b", r.Output)
	}
	const n = "30"
	base := []string{"ib_send_lat", "-d", s.device, "-c", "UD", "-s", "64", "-n", n, "-e"}
	run("perftest", append(append([]string{}, base...), "-x", "$RDMANET_TEST_GID_INDEX"),
		append(append([]string{}, base...), "-x", s.gidIndex, s.peer.String()), "Waiting for client")
	g, _ := nextGroups()
	common := []string{"rdmanet", "perf", "pingpong", "-backend", rdmanet.BackendRDMACore, "-group", g.IP.String(), "-size", "64"}
	run("rdmanet", append(append([]string{}, common...), "-role", "server", "-bind", s.peer.String()),
		append(append([]string{}, common...), "-role", "client", "-bind", s.addr.String(), "-count", n), "")
}
