package reliable

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/go-rdma/rdmanet/internal/testenv"
)

// Kernel-injected loss: a test or benchmark re-executes its own binary
// inside a private network namespace (unshare -n) where nftables drops a
// chosen fraction of the UDP 4791 packets (the software backend's RoCEv2)
// arriving on lo:
//
//	nft add rule inet t in udp dport 4791 numgen random mod 1000 < N counter drop
//
// Loss on lo is taken at the input hook, once per packet: a multicast
// datagram lost there is lost for every receiver in the namespace (the
// worst case for NAK implosion), and NAKs and status messages are lost at
// the same rate.
const (
	envNetnsLoss = "RDMANET_RELIABLE_LOSS" // set inside the namespace: loss in 1/100000
	envNFT       = testenv.EnvNFT          // 1: the kernel-loss tests must run (CI)
)

// lossInNetns returns the loss (in 1/100000) when running inside the
// namespace, or re-runs the test there and returns -1 (the caller returns).
// loss is in 1/100000: 10 = 0.01%, 1000 = 1%.
func lossInNetns(t testing.TB, loss int, name string, extra ...string) int {
	t.Helper()
	if v := os.Getenv(envNetnsLoss); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("%s=%q: %v", envNetnsLoss, v, err)
		}
		return n
	}
	must := testenv.NFT()
	need := func(format string, args ...any) {
		t.Helper()
		if must {
			t.Fatalf(format+" (%s=1: the kernel-loss tests must run)", append(args, envNFT)...)
		}
		t.Skipf(format, args...)
	}
	if testDevice != "" && !must {
		t.Skip("kernel loss with nftables runs on the software backend on the host; in the VM the deterministic drop tests cover rdma-core")
	}
	if os.Geteuid() != 0 {
		need("needs root: it makes a network namespace (unshare -n) with an nftables loss rule")
	}
	for _, tool := range []string{"unshare", "nft", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			need("%s not found: apt-get install nftables iproute2 util-linux", tool)
		}
	}
	rule := "true"
	if loss > 0 {
		// numgen mod 100000 < loss drops loss/100000 of the packets.
		rule = fmt.Sprintf("nft add table inet t && nft add chain inet t in '{ type filter hook input priority 0; }' && "+
			"nft add rule inet t in udp dport 4791 numgen random mod 100000 '<' %d counter drop", loss)
	}
	script := "ip link set lo up && " + rule + ` && exec "$0" "$@"`
	args := append([]string{"-n", "sh", "-c", script, os.Args[0], "-test.run", "^" + strings.ReplaceAll(t.Name(), "/", "$/^") + "$", "-test.v"}, extra...)
	if _, ok := t.(*testing.B); ok {
		args = append([]string{"-n", "sh", "-c", script, os.Args[0], "-test.run", "^$", "-test.bench", "^" + strings.ReplaceAll(name, "/", "$/^") + "$"}, extra...)
	}
	cmd := exec.Command("unshare", args...)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", envNetnsLoss, loss))
	out, err := cmd.CombinedOutput()
	if b, ok := t.(*testing.B); ok {
		// The child's benchmark lines are the results.
		os.Stdout.Write(out)
		if err != nil {
			b.Fatalf("in the namespace: %v", err)
		}
		return -1
	}
	t.Logf("in a namespace with %.3f%% loss:\n%s", float64(loss)/1000, out)
	if err != nil {
		t.Fatalf("in the namespace: %v", err)
	}
	return -1
}
