//go:build linux

package soft_test

import (
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/testenv"
)

// holdPortEnv makes the test binary a process that holds UDP port 4791
// (TestPortHolderIsFound): it binds 0.0.0.0:4791, says "holding" and
// waits to be killed.
const holdPortEnv = "RDMANET_HOLD_4791"

// TestMain runs the package's tests in a network namespace of their own
// when testenv.Device says this is the Soft-RoCE VM: there the kernel's
// rxe holds UDP port 4791 in the initial namespace, and a software QP
// cannot bind it. Elsewhere the tests run as they are (CI runs all of `go
// test` inside `unshare -n` already).
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
	if testenv.Device() != "" {
		if code, ran := testenv.MainInOwnNetns(); ran {
			os.Exit(code)
		}
	}
	os.Exit(m.Run())
}
