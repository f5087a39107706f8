package reliable

import (
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/testenv"
)

// New fails, and says why, when the process has no fd left for the
// conn's timer (timerfd_create: EMFILE); it leaves no fd behind and the
// rdmanet conn it was given is still the caller's: a New on it with fds
// to spare then runs. Seed 114: init's `if err != nil { return ... }`
// dropped made New fail with os.ErrInvalid (a nil *os.File's), and no
// test reached the return.
func TestNewFailsWithoutFds(t *testing.T) {
	if !testenv.InChild(t) {
		return
	}
	group := newGroup()
	c, err := testListenConfig().ListenMulticast(t.Context(), "rdma", nil, group)
	require.NoError(t, err)
	defer c.Close()
	before := testenv.OpenFds(t)
	restore := testenv.LimitFds(t, 0)
	rc, err := New(c, group, Config{})
	restore()
	require.Nil(t, rc)
	require.ErrorIs(t, err, syscall.EMFILE)
	var se *os.SyscallError
	require.ErrorAs(t, err, &se)
	require.Equal(t, "timerfd_create", se.Syscall)
	require.Equal(t, before, testenv.OpenFds(t), "fds open after the failed New")

	rc, err = New(c, group, Config{})
	require.NoError(t, err, "New on the same conn, with fds to spare")
	require.NoError(t, rc.Close())
}
