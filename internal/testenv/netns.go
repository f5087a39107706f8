package testenv

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// InOwnNetns reports whether t runs in a network namespace made for it
// alone. When not, it runs t there: it re-executes the test binary under
// `unshare -n` (root), with lo up and then the shell commands setup, checks
// that t passed, and returns false: the caller returns. Tests that change
// the namespace (lo's MTU, routes, nftables rules, veths) use it, so as not
// to change the one the rest run in. Without root it skips t.
func InOwnNetns(t *testing.T, setup ...string) bool {
	t.Helper()
	if IsNetnsChild(t) {
		return true
	}
	RunInOwnNetns(t, setup...)
	return false
}

// IsNetnsChild reports whether this process is the one InOwnNetns started
// for t.
func IsNetnsChild(t *testing.T) bool {
	return os.Getenv(EnvNetns) == t.Name()
}

// RunInOwnNetns is InOwnNetns for the parent: it runs t in a network
// namespace of its own, fails t unless t passed there, and returns what the
// child printed (-test.v), for more checks.
func RunInOwnNetns(t *testing.T, setup ...string) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("needs Linux: it runs in a private network namespace (unshare -n)")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: it runs in a private network namespace (unshare -n)")
	}
	script := strings.Join(append([]string{"ip link set lo up"}, setup...), " && ") + ` && exec "$0" "$@"`
	args := append([]string{"-n", "sh", "-c", script, os.Args[0]}, ChildTestArgs(t)...)
	cmd := exec.Command("unshare", args...)
	// Only the software backend runs in a namespace with lo alone.
	cmd.Env = append(os.Environ(), EnvNetns+"="+t.Name(), "RDMANET_BACKEND=")
	out, err := cmd.CombinedOutput()
	t.Logf("in a private network namespace:\n%s", out)
	if err != nil {
		t.Fatalf("in a private network namespace: %v", err)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("in a private network namespace: no \"--- PASS: %s\" in the output", t.Name())
	}
	return string(out)
}

// CanUnshare reports whether this process may make a network namespace
// with lo up.
func CanUnshare() bool {
	return runtime.GOOS == "linux" && exec.Command("unshare", "-n", "sh", "-c", "ip link set lo up").Run() == nil
}

// MainInOwnNetns is for a TestMain whose package cannot run beside the
// kernel's rxe (it binds UDP 4791): unless this process is already one
// that InOwnNetns or MainInOwnNetns started, it runs the whole test binary
// again under `unshare -n` with lo up, and returns its exit code and true;
// TestMain exits with it. Otherwise it returns false and TestMain runs
// the tests.
func MainInOwnNetns() (code int, ran bool) {
	if os.Getenv(EnvNetns) != "" {
		return 0, false
	}
	args := append([]string{"-n", "sh", "-c", `ip link set lo up && exec "$0" "$@"`}, os.Args...)
	cmd := exec.Command("unshare", args...)
	cmd.Env = append(os.Environ(), EnvNetns+"=*")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), true
		}
		os.Stderr.WriteString("unshare -n: " + err.Error() + "\n")
		return 1, true
	}
	return 0, true
}
