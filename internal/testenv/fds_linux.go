package testenv

import (
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// LimitFds leaves this process exactly free more fds: it lowers
// RLIMIT_NOFILE's soft limit and fills every free fd below it but free,
// so that the next fd made past those fails with EMFILE. restore gives
// the fds and the limit back. Only in a child process (InChild): the
// limit is process-wide.
func LimitFds(t *testing.T, free int) (restore func()) {
	t.Helper()
	if os.Getenv(EnvChild) == "" {
		t.Fatal("LimitFds outside a child process (InChild)")
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

// OpenFds counts this process's open fds.
func OpenFds(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents) - 1 // less the directory ReadDir opened
}
