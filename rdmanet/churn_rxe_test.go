//go:build linux

package rdmanet_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/testenv"
	"github.com/go-rdma/rdmanet/rdmanet"
)

// TestRXEDeviceChurn: rxe devices come and go under a process that keeps
// using rdma-core. Each round adds a device, listens on it from an OS
// thread of its own, deletes the device with the conn open (the conn lets
// go on DEVICE_REMOVAL), and then listens on rxe0. Every listen must
// return within 10 s.
//
// librdmacm 30 to 51 (Debian 12 has 44.0) sorts its device list with a
// comparator that truncates the difference of two pointers to an int
// (fixed upstream in v52, "librdmacm: Fix an overflow bug in qsort
// comparison function"). libibverbs allocates a device's struct on the
// thread that first lists it: one from the main thread's heap and one
// from another thread's malloc arena lie far enough apart to sort out of
// order, about half the time under ASLR. The next change of the device
// list then drops a device that is still there from librdmacm's list, and
// once that list is empty every rdma_cm call deadlocks on librdmacm's own
// mutex (ucma_init calls itself through ucma_set_af_ib_support). rdmanet
// lists devices only on its control thread (internal/verbs/rdmacore,
// control.go), so the structs share an arena.
//
// Each child process lists the devices first from the main thread (as a
// program whose main() listens first does), then churns: churnChildren
// fresh address-space layouts, so that without the control thread some
// child deadlocks (all pass with odds of about 2^-churnChildren).
func TestRXEDeviceChurn(t *testing.T) {
	testenv.NeedDevice(t)
	testenv.Need(t, testenv.EnvNS2) // set only by the VM harness
	if os.Getenv("RDMANET_CHURN_CHILD") != "1" {
		for i := 0; i < churnChildren; i++ {
			cmd := exec.Command(os.Args[0], "-test.run", "^TestRXEDeviceChurn$", "-test.v", "-test.timeout", "120s")
			cmd.Env = append(os.Environ(), "RDMANET_CHURN_CHILD=1")
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "child %d:\n%s", i, out)
			require.Contains(t, string(out), "--- PASS: TestRXEDeviceChurn", "child %d", i)
		}
		return
	}
	run := func(args ...string) {
		t.Helper()
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		require.NoError(t, err, "%s: %s", strings.Join(args, " "), out)
	}
	within := func(what string, f func() error) {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- f() }()
		select {
		case err := <-done:
			require.NoError(t, err, what)
		case <-time.After(10 * time.Second):
			buf := make([]byte, 1<<20)
			t.Fatalf("%s did not return within 10 s:\n%s", what, buf[:runtime.Stack(buf, true)])
		}
	}
	listenOn := func(addr net.IP, dev string) (*rdmanet.Conn, error) {
		lc := rdmanet.ListenConfig{Backend: rdmanet.BackendRDMACore, LocalAddr: addr, Device: dev}
		return lc.ListenMulticast(t.Context(), "rdma", nil, &net.UDPAddr{IP: net.IPv4(239, 1, 52, 1)})
	}
	within("a listen on rxe0", func() error {
		c, err := listenOn(net.ParseIP(testAddr), "")
		if err == nil {
			c.Close()
		}
		return err
	})
	const rounds = 2
	for r := 0; r < rounds; r++ {
		veth, dev := fmt.Sprintf("vethch%d", r), fmt.Sprintf("rxech%d", r)
		addr := net.IPv4(10, 95, byte(r), 1)
		run("ip", "link", "add", veth, "type", "veth", "peer", "name", veth+"p")
		run("ip", "addr", "add", addr.String()+"/24", "dev", veth)
		run("ip", "link", "set", veth, "up")
		run("ip", "link", "set", veth+"p", "up")
		run("rdma", "link", "add", dev, "type", "rxe", "netdev", veth)
		gid := fmt.Sprintf("0a5f:%02x01", r)
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			b, _ := os.ReadFile("/sys/class/infiniband/" + dev + "/ports/1/gids/1")
			if strings.Contains(string(b), gid) {
				break
			}
			require.True(t, time.Now().Before(deadline), "no GID for %v on %s", addr, dev)
		}
		// Listen on the new device from a new OS thread: the goroutine
		// exits locked to its thread, which then ends.
		var c *rdmanet.Conn
		within("listen on "+dev, func() error {
			got := make(chan error, 1)
			go func() {
				runtime.LockOSThread()
				var err error
				c, err = listenOn(addr, dev)
				got <- err
			}()
			return <-got
		})
		within("rdma link delete "+dev, func() error {
			out, err := exec.Command("rdma", "link", "delete", dev).CombinedOutput()
			if err != nil {
				return fmt.Errorf("%w: %s", err, out)
			}
			return nil
		})
		require.NoError(t, c.Close())
		run("ip", "link", "del", veth)
		within(fmt.Sprintf("round %d: listen on rxe0 after %s went", r, dev), func() error {
			c, err := listenOn(net.ParseIP(testAddr), "")
			if err == nil {
				c.Close()
			}
			return err
		})
	}
}

const churnChildren = 6

// churnChildMain is TestRXEDeviceChurn's child before its tests: the
// devices listed from the main thread, where main() would list them.
func churnChildMain() {
	runtime.LockOSThread()
	rdmanet.Devices()
	runtime.UnlockOSThread()
}
