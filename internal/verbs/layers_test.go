package verbs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The model and its providers sit below the public packages: nothing
// under internal/ depends on ipoib or rdmanet (the vocabulary they share
// is internal/infiniband), in code or tests (`go list -deps -test`).
// The exceptions sit above the public API on purpose: internal/perf, the
// benchmark harness that cmd/rdmanet and the benchmarks drive rdmanet
// through, and internal/tools. They are left out of the roots, so a model
// package that imported them would still fail here.
func TestModelDependsOnNoPublicPackage(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Skip("needs the source tree and the go command (go test in the repository; not in the rxe VM)")
	}
	goCmd, err := exec.LookPath("go") // go test puts GOROOT/bin first on PATH
	if err != nil {
		t.Fatalf("no go command on PATH: %v", err)
	}
	list := exec.Command(goCmd, "list", "-e", "-f", "{{.ImportPath}}", "./internal/...")
	list.Dir = root
	all, err := list.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var roots []string
	for _, p := range strings.Fields(string(all)) {
		if above(p) {
			continue
		}
		roots = append(roots, p)
	}
	cmd := exec.Command(goCmd, append([]string{"list", "-e", "-deps", "-test", "-f", "{{.ImportPath}}"}, roots...)...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 5 {
		t.Fatalf("go list -deps ./internal/... found %d packages, want more:\n%s", len(deps), out)
	}
	for _, p := range deps {
		p, _, _ = strings.Cut(p, " ") // "pkg [pkg.test]"
		switch p {
		case "github.com/go-rdma/rdmanet/ipoib", "github.com/go-rdma/rdmanet/rdmanet":
			t.Errorf("internal/ depends on %s, a package that exists for users", p)
		}
		if above(p) {
			t.Errorf("a model package depends on %s, which sits above the public API", p)
		}
	}
}

// above reports whether p is one of the internal packages that sit above
// the public API (see TestModelDependsOnNoPublicPackage).
func above(p string) bool {
	const mod = "github.com/go-rdma/rdmanet/internal/"
	return p == mod+"perf" || strings.HasPrefix(p, mod+"tools/")
}
