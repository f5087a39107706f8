//go:build linux

package selftest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/testenv"
)

const group = "239.1.2.3"

// env returns the variable's value. When testenv.Device is unset (not in
// the VM) the test is skipped; when it is set, every variable the VM
// exports must be too.
func env(t *testing.T, name string) string {
	t.Helper()
	if testenv.Device() == "" {
		t.Skip("no RDMA device: run `make test-rxe`")
	}
	return testenv.Need(t, name)
}

// TestDeliberateFailure lets the harness prove that a failing test makes
// `make test-rxe` fail: RXEVM_SELFTEST_FAIL=1 make test-rxe.
func TestDeliberateFailure(t *testing.T) {
	if os.Getenv("RXEVM_SELFTEST_FAIL") != "1" {
		t.Skip("RXEVM_SELFTEST_FAIL=1 makes this test fail on purpose")
	}
	t.Fatal("deliberate failure (RXEVM_SELFTEST_FAIL=1)")
}

func TestDeviceActiveWithGID(t *testing.T) {
	checkDevice(t, env(t, testenv.EnvDevice), env(t, testenv.EnvAddr))
}

func TestNamespacePeerDeviceActiveWithGID(t *testing.T) {
	checkDevice(t, env(t, testenv.EnvNSPeerDevice), env(t, testenv.EnvNSPeerAddr))
}

// checkDevice asserts that dev exists, port 1 is ACTIVE and one of its GIDs
// is the RoCEv2 GID of addr (::ffff:a.b.c.d).
func checkDevice(t *testing.T, dev, addr string) {
	t.Helper()
	port := filepath.Join("/sys/class/infiniband", dev, "ports/1")
	state, err := os.ReadFile(filepath.Join(port, "state"))
	if err != nil {
		t.Fatalf("device %s: %v", dev, err)
	}
	if !strings.Contains(string(state), "ACTIVE") {
		t.Fatalf("%s port 1 state: got %q, want ACTIVE", dev, strings.TrimSpace(string(state)))
	}
	want := net.ParseIP(addr)
	gids, err := filepath.Glob(filepath.Join(port, "gids/*"))
	if err != nil || len(gids) == 0 {
		t.Fatalf("%s: no GID table (%v)", dev, err)
	}
	var seen []string
	for _, g := range gids {
		b, err := os.ReadFile(g) // an unused entry reads as an error or all zeros
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(b))
		if net.ParseIP(s).Equal(want) {
			t.Logf("%s GID[%s] = %s", dev, filepath.Base(g), s)
			return
		}
		if net.ParseIP(s) != nil && !net.ParseIP(s).IsUnspecified() {
			seen = append(seen, s)
		}
	}
	t.Fatalf("%s GID table: got %v, want ::ffff:%s", dev, seen, addr)
}

// TestMckey runs rdma-core's mckey receiver and sender on the device's
// address: the kernel verbs, rdma_cm multicast join and rxe's loopback work.
func TestMckey(t *testing.T) {
	addr := env(t, testenv.EnvAddr)
	mckey, err := exec.LookPath("mckey")
	if err != nil {
		t.Fatalf("mckey (rdmacm-utils) not found: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var recvOut bytes.Buffer
	recv := exec.CommandContext(ctx, mckey, "-m", group, "-b", addr)
	recv.Stdout, recv.Stderr = &recvOut, &recvOut
	if err := recv.Start(); err != nil {
		t.Fatal(err)
	}
	recvDone := make(chan error, 1)
	go func() { recvDone <- recv.Wait() }()
	defer func() { cancel(); <-recvDone }()

	// A full-member join makes the kernel join the IP group on the netdev:
	// once /proc/net/igmp lists it, the receiver's QP is attached.
	if err := waitIGMP(ctx, group, recvDone); err != nil {
		t.Fatalf("receiver did not join %s: %v\n%s", group, err, &recvOut)
	}
	send, err := exec.CommandContext(ctx, mckey, "-m", group, "-b", addr, "-s").CombinedOutput()
	if err != nil {
		t.Fatalf("mckey sender: %v\n%s", err, send)
	}
	t.Logf("sender:\n%s", send)
	select {
	case err = <-recvDone:
		recvDone <- err // for the deferred wait
	case <-ctx.Done():
		err = ctx.Err()
	}
	t.Logf("receiver:\n%s", &recvOut)
	if err != nil || !strings.Contains(recvOut.String(), "data transfers complete") {
		t.Fatalf("mckey receiver: got err %v and no \"data transfers complete\", want both", err)
	}
}

// waitIGMP waits until /proc/net/igmp lists group (it prints addresses as
// little-endian hex), the context ends, or the receiver exits.
func waitIGMP(ctx context.Context, group string, exited chan error) error {
	ip := net.ParseIP(group).To4()
	hex := fmt.Sprintf("%02X%02X%02X%02X", ip[3], ip[2], ip[1], ip[0])
	for {
		b, err := os.ReadFile("/proc/net/igmp")
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(hex)) {
			return nil
		}
		select {
		case err := <-exited:
			exited <- err
			return fmt.Errorf("receiver exited: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestNamespaceUDP checks what the software backend relies on: in ns2 a
// program can bind UDP 4791 (rxe's socket lives in the initial namespace
// only), and reaches the rxe peer's address over the veth pair.
func TestNamespaceUDP(t *testing.T) {
	ns := env(t, testenv.EnvNS2)
	nsAddr := env(t, testenv.EnvNS2Addr)
	peerAddr := env(t, testenv.EnvNSPeerAddr)

	peer, err := net.ListenPacket("udp4", net.JoinHostPort(peerAddr, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	if c, err := net.ListenPacket("udp4", ":4791"); err == nil {
		c.Close()
		t.Log("UDP 4791 is free in the initial namespace (rxe did not bind it?)")
	} else {
		t.Logf("UDP 4791 in the initial namespace: %v (rxe holds it, as expected)", err)
	}

	c, err := listenInNamespace(ns, "udp4", net.JoinHostPort(nsAddr, "4791"))
	if err != nil {
		t.Fatalf("bind %s:4791 in %s: %v", nsAddr, ns, err)
	}
	defer c.Close()
	msg := []byte("hello from " + ns)
	if _, err := c.WriteTo(msg, peer.LocalAddr()); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	peer.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, from, err := peer.ReadFrom(buf)
	if err != nil {
		t.Fatalf("peer did not receive from %s: %v", ns, err)
	}
	if got, want := from.String(), net.JoinHostPort(nsAddr, "4791"); got != want || !bytes.Equal(buf[:n], msg) {
		t.Fatalf("got %q from %s, want %q from %s", buf[:n], got, msg, want)
	}
}

// listenInNamespace opens a packet socket inside the named network namespace
// (/run/netns/NAME, made by `ip netns add`). A socket keeps the namespace it
// was created in, so only its creation runs on a thread moved into ns; that
// thread stays locked and exits with its goroutine, never to run other code.
func listenInNamespace(ns, network, addr string) (net.PacketConn, error) {
	type result struct {
		c   net.PacketConn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // no unlock: the thread is discarded at exit
		f, err := os.Open(filepath.Join("/run/netns", ns))
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{err: fmt.Errorf("setns %s: %w", ns, err)}
			return
		}
		c, err := net.ListenPacket(network, addr)
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}
