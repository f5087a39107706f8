package testenv

import (
	"flag"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// ChildTestArgs are the arguments that make this test binary, run again
// in a child process, run t alone (a subtest too), verbosely, once, with
// a timeout short of the parent's (t.Deadline), if it has one. In a
// coverage run the child writes its counters where the parent's are
// merged (-test.gocoverdir), so what only the child executes counts as
// covered (the mutation tool's baseline would take it for code no test
// runs).
func ChildTestArgs(t *testing.T) []string {
	run := "^" + strings.ReplaceAll(t.Name(), "/", "$/^") + "$"
	args := []string{"-test.run=" + run, "-test.v", "-test.count=1"}
	if d, ok := t.Deadline(); ok {
		if left := time.Until(d); left > 0 {
			// The child times out first: one that hangs fails t with
			// its goroutines' stacks, rather than the parent's timing
			// out waiting for it and saying only that.
			args = append(args, "-test.timeout="+(left*9/10).String())
		}
	}
	if f := flag.Lookup("test.gocoverdir"); f != nil && f.Value.String() != "" {
		args = append(args, "-test.gocoverdir="+f.Value.String())
	}
	return args
}

// InChild reports whether this process is the child that InChild
// started for t. When not, it runs t again in a child process (this test
// binary, -test.run t, in the same network namespace), fails t unless t
// passed there, and returns false: the caller returns. It is for what
// must not happen to the whole test process (a lowered RLIMIT_NOFILE, a
// device deleted under librdmacm's device list). In a coverage run the
// child writes its counters where the parent's are merged
// (-test.gocoverdir), so what only the child executes is covered in the
// profile too.
func InChild(t *testing.T) bool {
	t.Helper()
	if IsChild(t) {
		return true
	}
	cmd := exec.Command(os.Args[0], ChildTestArgs(t)...)
	cmd.Env = append(os.Environ(), EnvChild+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("in a child process: %v\n%s", err, out)
	}
	t.Logf("child:\n%s", out)
	return false
}

// IsChild reports whether this process is the one InChild started for t.
func IsChild(t *testing.T) bool {
	return os.Getenv(EnvChild) == t.Name()
}
