//go:build linux

package soft_test

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// ownNetnsMarker names the test that runs in a network namespace of its
// own.
const ownNetnsMarker = "RDMANET_SOFT_OWN_NETNS"

// inOwnNetns reports whether t runs in a network namespace made for it
// alone (lo up, nothing else in it). When not, it runs t there, by
// re-executing the test binary under `unshare -n` (root), checks that it
// passed and returns false: the caller returns.
func inOwnNetns(t *testing.T) bool {
	t.Helper()
	if os.Getenv(ownNetnsMarker) == t.Name() {
		return true
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: it runs in a private network namespace (unshare -n)")
	}
	cmd := exec.Command("unshare", "-n", "sh", "-c", `ip link set lo up && exec "$0" "$@"`,
		os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), ownNetnsMarker+"="+t.Name(), "RDMANET_SOFT_NETNS=1")
	out, err := cmd.CombinedOutput()
	t.Logf("in a private network namespace:\n%s", out)
	require.NoError(t, err)
	require.Contains(t, string(out), "--- PASS: "+t.Name())
	return false
}
