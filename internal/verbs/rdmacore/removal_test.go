//go:build linux

package rdmacore_test

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// TestDeviceRemoval makes its own Soft-RoCE device on a private veth pair
// (rnrm0/rnrm1, 10.97.0.1), binds to it, deletes the device and checks
// that the ID reports DEVICE_REMOVAL, that calls then fail with
// ErrDeviceRemoved, and that Close still frees everything (the device
// deletion only completes once it has).
func TestDeviceRemoval(t *testing.T) {
	d := needDevice(t)
	if !strings.HasPrefix(d.name, "rxe") || os.Geteuid() != 0 {
		t.Skip("device removal needs root and Soft-RoCE (RDMANET_TEST_DEVICE=rxe*)")
	}
	ipCmd, err1 := exec.LookPath("ip")
	rdmaCmd, err2 := exec.LookPath("rdma")
	if err1 != nil || err2 != nil {
		t.Skip("device removal needs iproute2's ip and rdma")
	}
	run := func(name string, args ...string) {
		t.Helper()
		out, err := exec.Command(name, args...).CombinedOutput()
		require.NoError(t, err, "%s %s: %s", name, strings.Join(args, " "), out)
	}
	run(ipCmd, "link", "add", "rnrm0", "type", "veth", "peer", "name", "rnrm1")
	t.Cleanup(func() { exec.Command(ipCmd, "link", "del", "rnrm0").Run() })
	run(ipCmd, "addr", "add", "10.97.0.1/24", "dev", "rnrm0")
	run(ipCmd, "link", "set", "rnrm0", "up")
	run(ipCmd, "link", "set", "rnrm1", "up")
	run(rdmaCmd, "link", "add", "rnrm", "type", "rxe", "netdev", "rnrm0")
	deleted := false
	t.Cleanup(func() {
		if !deleted {
			exec.Command(rdmaCmd, "link", "delete", "rnrm").Run()
		}
	})

	addr := net.IPv4(10, 97, 0, 1)
	var id verbs.ID
	var err error
	for start := time.Now(); time.Since(start) < 10*time.Second; time.Sleep(100 * time.Millisecond) {
		if id, err = d.p.Bind(verbs.BindConfig{Addr: addr}); err == nil {
			break
		}
	}
	require.NoError(t, err, "Bind to the new device")
	defer id.Close()
	require.Equal(t, "rnrm", id.Local().Device)
	qp, err := id.CreateQP(verbs.QPConfig{})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = id.Join(ctx, verbs.Group{IP: net.IPv4(239, 7, 7, 9)}, verbs.JoinOptions{})
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() {
		out, err := exec.Command(rdmaCmd, "link", "delete", "rnrm").CombinedOutput()
		if err != nil {
			err = errors.New(err.Error() + ": " + string(out))
		}
		done <- err
	}()

	var ev verbs.Event
	got := false
	for start := time.Now(); !got && time.Since(start) < 20*time.Second; {
		fds := []unix.PollFd{{Fd: int32(id.Events().Fd()), Events: unix.POLLIN}}
		unix.Poll(fds, 100)
		for {
			e, ok, err := id.Events().Next()
			require.NoError(t, err)
			if !ok {
				break
			}
			t.Logf("event %v status %d", e.Type, e.Status)
			if e.Type == verbs.EventDeviceRemoval {
				ev, got = e, true
			}
		}
	}
	require.True(t, got, "no DEVICE_REMOVAL event")
	assert.Equal(t, verbs.EventDeviceRemoval, ev.Type)
	_, err = qp.PostRecv([]verbs.RecvWR{{}})
	assert.True(t, errors.Is(err, verbs.ErrDeviceRemoved), "PostRecv after removal: got %v", err)
	_, err = id.Join(ctx, verbs.Group{IP: net.IPv4(239, 7, 7, 10)}, verbs.JoinOptions{})
	assert.True(t, errors.Is(err, verbs.ErrDeviceRemoved), "Join after removal: got %v", err)
	require.NoError(t, id.Close(), "Close after removal")

	select {
	case err := <-done:
		require.NoError(t, err, "rdma link delete")
		deleted = true
	case <-time.After(20 * time.Second):
		t.Fatal("rdma link delete did not finish after Close: something still holds the device")
	}
}
