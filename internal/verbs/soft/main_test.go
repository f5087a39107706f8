//go:build linux

package soft_test

import (
	"fmt"
	"os"
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMain runs the package's tests in a network namespace of their own
// when RDMANET_TEST_DEVICE says this is the Soft-RoCE VM: there the
// kernel's rxe holds UDP port 4791 in the initial namespace, and a
// software QP cannot bind it. Elsewhere the tests run as they are (CI runs
// all of `go test` inside `unshare -n` already).
// holdPortEnv makes the test binary a process that holds UDP port 4791
// (TestPortHolderIsFound): it binds 0.0.0.0:4791, says "holding" and
// waits to be killed.
const holdPortEnv = "RDMANET_HOLD_4791"

func TestMain(m *testing.M) {
	if os.Getenv(holdPortEnv) != "" {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
		if err == nil {
			err = unix.Bind(fd, &unix.SockaddrInet4{Port: 4791})
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "hold 4791:", err)
			os.Exit(1)
		}
		fmt.Println("holding")
		select {}
	}
	if os.Getenv("RDMANET_TEST_DEVICE") != "" && os.Getenv("RDMANET_SOFT_NETNS") == "" {
		args := append([]string{"-n", "sh", "-c", `ip link set lo up && exec "$0" "$@"`}, os.Args...)
		cmd := exec.Command("unshare", args...)
		cmd.Env = append(os.Environ(), "RDMANET_SOFT_NETNS=1")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			if ee, ok := err.(*exec.ExitError); ok {
				os.Exit(ee.ExitCode())
			}
			fmt.Fprintln(os.Stderr, "soft tests: unshare -n:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
