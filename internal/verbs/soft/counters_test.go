//go:build linux

package soft_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/testenv"
	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/internal/verbs/soft"
)

// TestParseUDPMIB reads the Udp lines of /proc/net/snmp as kernels print
// them, old ones with fewer fields included.
func TestParseUDPMIB(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want map[string]uint64
	}{
		{"6.1", "Ip: Forwarding DefaultTTL\nIp: 1 64\n" +
			"Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\n" +
			"Udp: 10 1 7 12 6 0 0 3 0\n" +
			"UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\n" +
			"UdpLite: 99 99 99 99 99 99 99 99 99\n",
			map[string]uint64{"UdpInDatagrams": 10, "UdpNoPorts": 1, "UdpInErrors": 7, "UdpOutDatagrams": 12,
				"UdpRcvbufErrors": 6, "UdpSndbufErrors": 0, "UdpInCsumErrors": 0, "UdpIgnoredMulti": 3, "UdpMemErrors": 0}},
		{"3.10, no IgnoredMulti or MemErrors", "Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors\n" +
			"Udp: 5 0 2 5 2 0 0\n",
			map[string]uint64{"UdpInDatagrams": 5, "UdpNoPorts": 0, "UdpInErrors": 2, "UdpOutDatagrams": 5,
				"UdpRcvbufErrors": 2, "UdpSndbufErrors": 0, "UdpInCsumErrors": 0}},
		{"unknown field skipped", "Udp: InDatagrams Future RcvbufErrors\nUdp: 1 2 3\n",
			map[string]uint64{"UdpInDatagrams": 1, "UdpRcvbufErrors": 3}},
		{"no Udp line", "Ip: Forwarding\nIp: 1\n", nil},
		{"names without values", "Udp: InDatagrams\n", nil},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, soft.ParseUDPMIB([]byte(c.in)), c.name)
	}
}

// TestDeviceCountsSeeRcvbufErrors: datagrams that find a receiver's socket
// buffer full are dropped by the kernel's UDP layer, which counts them in
// the namespace's UDP MIB; the QP's device counters show that growth
// (UdpRcvbufErrors, also in UdpInErrors), the same count as the QP's own
// overflow drops when nothing else in the namespace drops.
func TestDeviceCountsSeeRcvbufErrors(t *testing.T) {
	if !testenv.InOwnNetns(t) {
		return
	}
	rx := newEndpoint(t, verbs.QPConfig{})
	tx := newEndpoint(t, verbs.QPConfig{})
	const group = "239.80.1.1"
	m, _ := rx.join(group, false)
	_, ah := tx.join(group, true)
	before := rx.qp.DeviceCounts()
	require.NotNil(t, before, "no device counters: is /proc/thread-self/net/snmp readable?")
	assert.Zero(t, before["UdpRcvbufErrors"], "nothing dropped yet")

	// No receive posted: the multicast socket's buffer (4 MiB at most)
	// fills and the kernel drops the rest.
	const n, size = 8000, 1024
	for range n {
		tx.send(ah, m.RemoteQPN, make([]byte, size), 0, 0)
	}
	d := rx.qp.DeviceCounts()
	overflow := rx.qp.Drops().Overflow
	t.Logf("after %d datagrams of %d B: device %v; the QP's overflow %d", n, size, d, overflow)
	require.Positive(t, overflow, "the QP saw no overflow: the flood did not fill the socket buffer")
	assert.Equal(t, overflow, d["UdpRcvbufErrors"], "the namespace's RcvbufErrors: the one socket that dropped")
	assert.GreaterOrEqual(t, d["UdpInErrors"], d["UdpRcvbufErrors"], "RcvbufErrors count in InErrors too")
	assert.GreaterOrEqual(t, d["UdpOutDatagrams"], uint64(n), "the sends")
	_, has := rx.qp.DropCounts()[verbs.DropDeviceOverflow]
	assert.False(t, has, "the namespace's counts are not the QP's drops: Drops.Overflow is exact")
}

// TestDeviceCountsAfterClose: a closed QP has no device counters.
func TestDeviceCountsAfterClose(t *testing.T) {
	p, err := verbs.Lookup(verbs.Software)
	require.NoError(t, err)
	id, err := p.Bind(verbs.BindConfig{})
	require.NoError(t, err)
	qp, err := id.CreateQP(verbs.QPConfig{})
	require.NoError(t, err)
	require.NotNil(t, qp.DeviceCounts())
	require.NoError(t, id.Close())
	assert.Nil(t, qp.DeviceCounts())
}

// TestDeviceCountsFromAnotherNamespace: a QP made on a thread in another
// network namespace reports that namespace's UDP MIB, whatever namespace
// the thread that asks is in (DeviceCounts enters the QP's namespace on a
// thread of its own).
func TestDeviceCountsFromAnotherNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: it makes a network namespace (unshare(CLONE_NEWNET))")
	}
	type made struct {
		rx, tx *endpoint
		err    error
	}
	ch := make(chan made, 1)
	go func() {
		// This thread goes into a new namespace and comes back once the
		// QPs are made (their sockets stay in it). A thread that cannot
		// come back stays locked and ends with the goroutine; it must not
		// be left in the namespace unlocked, nor end there as the main
		// thread, whose namespace /proc/self/net shows.
		runtime.LockOSThread()
		back, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			ch <- made{err: err}
			return
		}
		defer unix.Close(back)
		defer func() {
			if unix.Setns(back, unix.CLONE_NEWNET) == nil {
				runtime.UnlockOSThread()
			}
		}()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			ch <- made{err: err}
			return
		}
		if out, err := exec.Command("ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
			ch <- made{err: fmt.Errorf("ip link set lo up: %v: %s", err, out)}
			return
		}
		var m made
		m.rx, m.err = tryEndpoint(t)
		if m.err == nil {
			m.tx, m.err = tryEndpoint(t)
		}
		if m.err == nil {
			m.err = flood(m.rx, m.tx, "239.80.4.1", 8000)
		}
		ch <- m
	}()
	m := <-ch
	require.NoError(t, m.err)
	d := m.rx.qp.DeviceCounts()
	overflow := m.rx.qp.Drops().Overflow
	t.Logf("asked from the test's namespace: device %v; the QP's overflow %d", d, overflow)
	require.NotNil(t, d, "no device counters from another namespace")
	require.Positive(t, overflow)
	assert.Equal(t, overflow, d["UdpRcvbufErrors"], "the QP's namespace's count, not the caller's")

	// The fd of the QP's namespace may be fd 0 (stdin closed): it is
	// used, and closed after.
	withFd0Closed(t, func() {
		d0 := m.rx.qp.DeviceCounts()
		require.NotNil(t, d0, "no device counters with the namespace's fd at 0")
		assert.Equal(t, d["UdpRcvbufErrors"], d0["UdpRcvbufErrors"])
		_, err := unix.FcntlInt(0, unix.F_GETFD, 0)
		require.Error(t, err, "the namespace's fd, at 0, left open")
	})
}

// countsChildEnv names the test that a child process started by
// runCountsChild runs, in the parent's network namespace.
const countsChildEnv = "RDMANET_SOFT_COUNTS_CHILD"

// runCountsChild runs t again in a child process (this test binary,
// -test.run t), made by start (which calls cmd.Start), and fails t unless
// t passed there. It reports whether this process is that child; when
// not, the caller returns.
func runCountsChild(t *testing.T, start func(cmd *exec.Cmd) error) bool {
	t.Helper()
	if os.Getenv(countsChildEnv) == t.Name() {
		return true
	}
	cmd := exec.Command(os.Args[0], testenv.ChildTestArgs(t)...)
	cmd.Env = append(os.Environ(), countsChildEnv+"="+t.Name())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := start(cmd); err != nil {
		t.Skipf("cannot start the child: %v", err)
	}
	err := cmd.Wait()
	if err != nil || !strings.Contains(out.String(), "--- PASS: "+t.Name()) {
		t.Fatalf("in a child process: %v\n%s", err, out.String())
	}
	return false
}

// floodAndCount floods a QP of this process's network namespace and wants
// its device counters to show the QP's drops.
func floodAndCount(t *testing.T, group string) {
	rx := newEndpoint(t, verbs.QPConfig{})
	tx := newEndpoint(t, verbs.QPConfig{})
	require.NoError(t, flood(rx, tx, group, 8000))
	d := rx.qp.DeviceCounts()
	overflow := rx.qp.Drops().Overflow
	t.Logf("device %v; the QP's overflow %d", d, overflow)
	require.NotNil(t, d, "no device counters")
	require.Positive(t, overflow)
	assert.Equal(t, overflow, d["UdpRcvbufErrors"])
}

// setnsOwn tries setns(2) into the calling thread's own network
// namespace, on a locked thread.
func setnsOwn(t *testing.T) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	self, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(self)
	return unix.Setns(self, unix.CLONE_NEWNET)
}

// socketNetns tries SIOCGSKNS (the namespace of a socket) on a new UDP
// socket.
func socketNetns(t *testing.T) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(fd)
	ns, err := unix.IoctlRetInt(fd, unix.SIOCGSKNS)
	if err == nil {
		unix.Close(ns)
	}
	return err
}

// TestDeviceCountsWithoutSysAdmin: a process that may learn its sockets'
// network namespace (SIOCGSKNS needs CAP_NET_ADMIN over it) but not enter
// it (setns needs CAP_SYS_ADMIN), as a service given CAP_NET_ADMIN alone,
// has the device counters of a QP in its own namespace: DeviceCounts sees
// that the namespace is the calling thread's and reads it there, without
// entering it. The test runs itself again as a child without CAP_SYS_ADMIN
// (dropped from the bounding set of the thread that starts it).
func TestDeviceCountsWithoutSysAdmin(t *testing.T) {
	child := runCountsChild(t, func(cmd *exec.Cmd) error {
		ch := make(chan error, 1)
		go func() {
			// The thread's bounding set stays narrowed: it is never
			// unlocked, and ends with the goroutine.
			runtime.LockOSThread()
			if err := unix.Prctl(unix.PR_CAPBSET_DROP, unix.CAP_SYS_ADMIN, 0, 0, 0); err != nil {
				ch <- fmt.Errorf("needs CAP_SETPCAP (root): PR_CAPBSET_DROP: %w", err)
				return
			}
			ch <- cmd.Start()
		}()
		return <-ch
	})
	if !child {
		return
	}
	require.NoError(t, socketNetns(t), "SIOCGSKNS without CAP_SYS_ADMIN")
	require.ErrorIs(t, setnsOwn(t), unix.EPERM, "the child may enter its namespace: it has CAP_SYS_ADMIN")
	floodAndCount(t, "239.80.5.1")
}

// TestDeviceCountsInUserNamespace: a process that may not even learn its
// sockets' network namespace (SIOCGSKNS fails with EPERM without
// CAP_NET_ADMIN over it: an unprivileged process, or one in a user
// namespace of its own, as here) takes it for the calling thread's, and
// has the device counters of a QP made there.
func TestDeviceCountsInUserNamespace(t *testing.T) {
	child := runCountsChild(t, func(cmd *exec.Cmd) error {
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
		}
		return cmd.Start()
	})
	if !child {
		return
	}
	require.ErrorIs(t, socketNetns(t), unix.EPERM, "SIOCGSKNS in a user namespace of its own")
	floodAndCount(t, "239.80.5.2")
}

// tryEndpoint is newEndpoint for a goroutine other than the test's: it
// returns errors instead of failing.
func tryEndpoint(t *testing.T) (*endpoint, error) {
	p, err := verbs.Lookup(verbs.Software)
	if err != nil {
		return nil, err
	}
	id, err := p.Bind(verbs.BindConfig{})
	if err != nil {
		return nil, err
	}
	qp, err := id.CreateQP(verbs.QPConfig{})
	if err != nil {
		id.Close()
		return nil, err
	}
	a, err := verbs.NewArena(2 * nBufs * bufSize)
	if err != nil {
		id.Close()
		return nil, err
	}
	mr, err := qp.RegisterMemory(a)
	if err != nil {
		id.Close()
		a.Free()
		return nil, err
	}
	t.Cleanup(func() {
		id.Close()
		a.Free()
	})
	return &endpoint{t: t, id: id, qp: qp.(*soft.QP), arena: a, mr: mr}, nil
}

// flood joins rx to group (no receive posted) and sends it n datagrams of
// 1 KiB from tx, send-only.
func flood(rx, tx *endpoint, group string, n int) error {
	ctx := context.Background()
	g := verbs.Group{IP: net.ParseIP(group)}
	m, err := rx.id.Join(ctx, g, verbs.JoinOptions{})
	if err != nil {
		return err
	}
	mt, err := tx.id.Join(ctx, g, verbs.JoinOptions{SendOnly: true})
	if err != nil {
		return err
	}
	ah, err := tx.qp.CreateAH(mt.AH)
	if err != nil {
		return err
	}
	wr := []verbs.SendWR{{SGE: tx.sendSGE(0, 1024), AH: ah, RemoteQPN: m.RemoteQPN, RemoteQKey: tx.qp.QKey()}}
	for range n {
		if _, err := tx.qp.PostSend(wr); err != nil {
			return err
		}
	}
	return nil
}
