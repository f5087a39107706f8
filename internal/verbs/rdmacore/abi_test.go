//go:build linux

package rdmacore

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestABI compiles testdata/abicheck.c against rdma-core's real headers
// and runs it: every struct, member and constant in rdma_abi.h must match.
// It skips only where the check cannot exist (no headers or no compiler).
func TestABI(t *testing.T) {
	for _, h := range []string{"/usr/include/infiniband/verbs.h", "/usr/include/rdma/rdma_cma.h", "/usr/include/infiniband/ib.h"} {
		if _, err := os.Stat(h); err != nil {
			t.Skipf("rdma-core headers not installed (%s): apt-get install libibverbs-dev librdmacm-dev", h)
		}
	}
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		t.Skipf("no C compiler %q", cc)
	}
	bin := filepath.Join(t.TempDir(), "abicheck")
	out, err := exec.Command(cc, "-Wall", "-Werror", "-o", bin, filepath.Join("testdata", "abicheck.c")).CombinedOutput()
	if err != nil {
		t.Fatalf("compile abicheck.c: %v\n%s", err, out)
	}
	out, err = exec.Command(bin).CombinedOutput()
	if err != nil {
		t.Fatalf("rdma_abi.h differs from rdma-core's headers: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	last := lines[len(lines)-1]
	if !strings.HasSuffix(last, " 0 mismatches") || len(lines) < 300 {
		t.Fatalf("abicheck: got %d lines ending %q, want >= 300 checks and 0 mismatches", len(lines), last)
	}
	t.Log(last)
}
