package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The commands and the examples are the first users of the public API:
// what they need, a library user needs too. No package under cmd/ or
// examples/ imports the module's internal/ packages (`go list` of their
// direct imports), in its code or its tests, but for two: the tests may
// import internal/testenv, the test environment every package's tests
// share, and the commands internal/perf, the measuring harness `rdmanet
// perf` shares with the benchmarks, whose own code in turn imports no
// internal/ package: it measures through the public API too.
func TestCommandsUseOnlyThePublicAPI(t *testing.T) {
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
	cmd := exec.Command(goCmd, "list", "-e", "-f",
		`{{.ImportPath}}{{range .Imports}} {{.}}{{end}}{{range .TestImports}} test:{{.}}{{end}}{{range .XTestImports}} test:{{.}}{{end}}`,
		"./cmd/...", "./examples/...")
	harness := exec.Command(goCmd, "list", "-e", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./internal/perf")
	harness.Dir = root
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	hout, err := harness.Output()
	if err != nil {
		t.Fatalf("go list ./internal/perf: %v", err)
	}
	out = append(out, hout...)
	const internal = "github.com/go-rdma/rdmanet/internal/"
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		n++
		seen := map[string]bool{}
		for _, imp := range f[1:] {
			imp, test := strings.CutPrefix(imp, "test:")
			if test && imp == internal+"testenv" {
				continue
			}
			harnessOK := imp == internal+"perf" && strings.HasPrefix(f[0], "github.com/go-rdma/rdmanet/cmd/")
			if strings.HasPrefix(imp, internal) && !harnessOK && !seen[imp] {
				seen[imp] = true
				t.Errorf("%s imports %s: export what it needs from rdmanet or ipoib instead", f[0], imp)
			}
		}
	}
	if n < 2 {
		t.Errorf("go list found %d packages under cmd/ and examples/, want at least 2:\n%s", n, out)
	}
}
