package reliable

import (
	"flag"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// New fails, and says why, when the process has no fd left for the
// conn's timer (timerfd_create: EMFILE); it leaves no fd behind and the
// rdmanet conn it was given is still the caller's: a New on it with fds
// to spare then runs. Seed 114: init's `if err != nil { return ... }`
// dropped made New fail with os.ErrInvalid (a nil *os.File's), and no
// test reached the return.
func TestNewFailsWithoutFds(t *testing.T) {
	if !inChild(t) {
		return
	}
	group := newGroup()
	c, err := testListenConfig().ListenMulticast(t.Context(), "rdma", nil, group)
	require.NoError(t, err)
	defer c.Close()
	before := openFds(t)
	restore := limitFds(t, 0)
	rc, err := New(c, group, Config{})
	restore()
	require.Nil(t, rc)
	require.ErrorIs(t, err, syscall.EMFILE)
	var se *os.SyscallError
	require.ErrorAs(t, err, &se)
	require.Equal(t, "timerfd_create", se.Syscall)
	require.Equal(t, before, openFds(t), "fds open after the failed New")

	rc, err = New(c, group, Config{})
	require.NoError(t, err, "New on the same conn, with fds to spare")
	require.NoError(t, rc.Close())
}

// childEnv names the test a child process started by inChild runs.
const childEnv = "RDMANET_RELIABLE_CHILD"

// inChild reports whether this process is the child that inChild
// started for t. When not, it runs t again in a child process (this test
// binary, -test.run t, in the same network namespace), fails t unless t
// passed there, and returns false: the caller returns. It is for what
// must not happen to the whole test process (a lowered RLIMIT_NOFILE).
// In a coverage run the child writes its counters where the parent's
// are merged (-test.gocoverdir). As internal/verbs/soft's.
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
// the fds and the limit back. Only in a child process (inChild): the
// limit is process-wide.
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
