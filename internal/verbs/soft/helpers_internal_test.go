//go:build linux

package soft

import (
	"flag"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// internalQP is a QP bound on lo with cfg, closed when t ends, for the
// tests that look inside it.
func internalQP(t *testing.T, cfg verbs.QPConfig) *QP {
	t.Helper()
	id, err := Provider{}.Bind(verbs.BindConfig{})
	if err != nil {
		t.Fatalf("Bind: %v", err)
	}
	t.Cleanup(func() { id.Close() })
	qp, err := id.CreateQP(cfg)
	if err != nil {
		t.Fatalf("CreateQP: %v", err)
	}
	return qp.(*QP)
}

// childEnv names the test a child process started by inChild runs.
const childEnv = "RDMANET_SOFT_CHILD"

// inChild reports whether this process is the child that inChild
// started for t. When not, it runs t again in a child process (this test
// binary, -test.run t, in the same network namespace), fails t unless t
// passed there, and returns false: the caller returns. It is for what
// must not happen to the whole test process (a lowered RLIMIT_NOFILE).
// In a coverage run the child writes its counters where the parent's
// are merged (-test.gocoverdir), so what only the child executes is
// covered in the profile too.
func inChild(t *testing.T) bool {
	t.Helper()
	if os.Getenv(childEnv) == t.Name() {
		return true
	}
	args := []string{"-test.run=^" + t.Name() + "$", "-test.v", "-test.count=1"}
	if f := flag.Lookup("test.gocoverdir"); f != nil && f.Value.String() != "" {
		args = append(args, "-test.gocoverdir="+f.Value.String())
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), childEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("in a child process: %v\n%s", err, out)
	}
	return false
}

// limitFds leaves this process exactly free more fds: it lowers
// RLIMIT_NOFILE's soft limit and fills every free fd below it but free,
// so that the next fd made past those fails with EMFILE. restore gives
// the fds and the limit back. Only in a child process (inChild): the limit
// is process-wide.
func limitFds(t *testing.T, free int) (restore func()) {
	t.Helper()
	if os.Getenv(childEnv) == "" {
		t.Fatal("limitFds outside a child process")
	}
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	top := 0
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil {
			top = max(top, fd)
		}
	}
	lim := old
	lim.Cur = uint64(top + 1 + free)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	var fill []int
	for {
		fd, err := unix.Dup(2)
		if err != nil {
			break
		}
		fill = append(fill, fd)
	}
	if len(fill) < free {
		t.Fatalf("only %d fds free under the limit", len(fill))
	}
	for _, fd := range fill[len(fill)-free:] {
		unix.Close(fd)
	}
	fill = fill[:len(fill)-free]
	return func() {
		for _, fd := range fill {
			unix.Close(fd)
		}
		unix.Setrlimit(unix.RLIMIT_NOFILE, &old)
	}
}

// openFds counts this process's open fds.
func openFds(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents) - 1 // less the directory ReadDir opened
}
