//go:build linux

package soft_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/infiniband"
	"github.com/go-rdma/rdmanet/internal/roce"
	"github.com/go-rdma/rdmanet/internal/testenv"
	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/internal/verbs/soft"
)

func TestRegistered(t *testing.T) {
	p, err := verbs.Lookup(verbs.Software)
	require.NoError(t, err)
	assert.Equal(t, verbs.Software, p.Name())
	assert.NoError(t, p.Available())
}

func TestDevices(t *testing.T) {
	devs, err := soft.Provider{}.Devices()
	require.NoError(t, err)
	var lo *verbs.DeviceAttr
	for i := range devs {
		if devs[i].Name == "sw-lo" {
			lo = &devs[i]
		}
	}
	require.NotNil(t, lo, "no sw-lo in %v", devs)
	assert.Equal(t, verbs.Software, lo.Provider)
	require.Len(t, lo.Ports, 1)
	port := lo.Ports[0]
	assert.Equal(t, 1, port.Port)
	assert.Equal(t, infiniband.PortActive, port.State)
	assert.Equal(t, 4096, port.ActiveMTU)
	assert.Equal(t, infiniband.LinkLayerEthernet, port.LinkLayer)
	assert.Equal(t, "lo", port.Netdev)
	require.NotEmpty(t, port.GIDs)
	assert.Equal(t, "::ffff:127.0.0.1", port.GIDs[0].GID.String())
	assert.Equal(t, infiniband.GIDTypeRoCEv2, port.GIDs[0].Type)
	assert.Positive(t, lo.MaxMcastGroups)
}

func TestBind(t *testing.T) {
	p := soft.Provider{}
	lo, err := net.InterfaceByName("lo")
	require.NoError(t, err)
	for _, cfg := range []verbs.BindConfig{
		{},
		{Addr: net.IPv4(127, 0, 0, 1)},
		{Interface: lo},
		{Device: "sw-lo"},
		{Interface: &net.Interface{Index: lo.Index}, Port: 1},
	} {
		assert.True(t, p.Serves(cfg), "%+v", cfg)
		id, err := p.Bind(cfg)
		require.NoError(t, err, "%+v", cfg)
		b := id.Local()
		assert.Equal(t, "sw-lo", b.Device)
		assert.Equal(t, "lo", b.Netdev)
		assert.Equal(t, 1, b.Port)
		assert.Equal(t, net.IPv4(127, 0, 0, 1).To4(), b.IP.To4())
		assert.Equal(t, 4096, b.MTU)
		assert.Equal(t, infiniband.GIDTypeRoCEv2, b.GIDType)
		require.NoError(t, id.Close())
		require.NoError(t, id.Close(), "Close is idempotent")
	}
	for _, tc := range []struct {
		cfg  verbs.BindConfig
		want error
	}{
		{verbs.BindConfig{Addr: net.IPv4(198, 51, 100, 77)}, verbs.ErrNoDevice},
		{verbs.BindConfig{Interface: &net.Interface{Name: "nonexistent0"}}, verbs.ErrNoDevice},
		{verbs.BindConfig{Device: "mlx5_0"}, verbs.ErrNoDevice},
		{verbs.BindConfig{Port: 2}, verbs.ErrNoDevice},
		{verbs.BindConfig{Addr: net.IPv4(127, 0, 0, 1), Interface: &net.Interface{Name: "eth0"}}, verbs.ErrNoDevice},
		{verbs.BindConfig{IPv6: true}, verbs.ErrNotSupported},
	} {
		assert.False(t, p.Serves(tc.cfg), "%+v", tc.cfg)
		_, err := p.Bind(tc.cfg)
		assert.ErrorIs(t, err, tc.want, "%+v", tc.cfg)
	}
}

func TestJoinErrors(t *testing.T) {
	p := soft.Provider{}
	id, err := p.Bind(verbs.BindConfig{})
	require.NoError(t, err)
	defer id.Close()
	ctx := context.Background()
	_, err = id.Join(ctx, verbs.Group{IP: net.ParseIP("239.202.2.2")}, verbs.JoinOptions{})
	assert.Error(t, err, "join before CreateQP")
	_, err = id.CreateQP(verbs.QPConfig{})
	require.NoError(t, err)
	_, err = id.CreateQP(verbs.QPConfig{})
	assert.Error(t, err, "second QP")
	_, err = id.Join(ctx, verbs.Group{IP: net.ParseIP("10.1.2.3")}, verbs.JoinOptions{})
	assert.ErrorContains(t, err, "not a multicast")
	_, err = id.Join(ctx, verbs.Group{IP: net.ParseIP("ff02::1234")}, verbs.JoinOptions{})
	assert.ErrorIs(t, err, verbs.ErrNotSupported)
	ibMGID, _ := infiniband.ParseGID("ff12:401b:ffff::e001:203")
	_, err = id.Join(ctx, verbs.Group{MGID: ibMGID}, verbs.JoinOptions{})
	assert.ErrorIs(t, err, verbs.ErrNotSupported)
	mgid, _ := infiniband.ParseGID("::ffff:239.2.2.2")
	m, err := id.Join(ctx, verbs.Group{MGID: mgid}, verbs.JoinOptions{})
	require.NoError(t, err)
	assert.Equal(t, mgid, m.AH.DGID)
	assert.True(t, m.AH.IsGlobal)
	assert.Equal(t, verbs.DefaultQKey, m.QKey)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = id.Join(cctx, verbs.Group{IP: net.ParseIP("239.202.2.3")}, verbs.JoinOptions{})
	assert.ErrorIs(t, err, context.Canceled)
	_, err = id.(*soft.ID).CreateQP(verbs.QPConfig{})
	assert.Error(t, err)
	qp := idQP(t, id)
	_, err = qp.CreateAH(verbs.AHAttr{DGID: ibMGID})
	assert.ErrorIs(t, err, verbs.ErrNotSupported)
	_, err = qp.CreateAH(verbs.AHAttr{})
	assert.Error(t, err)
}

// idQP makes a second ID with a QP, for calls that need one.
func idQP(t *testing.T, _ verbs.ID) verbs.QP {
	id, err := soft.Provider{}.Bind(verbs.BindConfig{})
	require.NoError(t, err)
	t.Cleanup(func() { id.Close() })
	qp, err := id.CreateQP(verbs.QPConfig{})
	require.NoError(t, err)
	return qp
}

func TestInjectEvent(t *testing.T) {
	e := newEndpoint(t, verbs.QPConfig{})
	m, ah := e.join("239.203.3.3", false)
	ch := e.id.Events()
	_, ok, err := ch.Next()
	require.NoError(t, err)
	assert.False(t, ok)
	assert.Equal(t, -1, ch.Fd(), "the event channel needs no fd")
	w, err := ch.NewWaiter()
	require.NoError(t, err)
	evs := make([]verbs.Event, 4)
	done := make(chan int, 1)
	go func() {
		n, err := w.WaitPoll(evs)
		assert.NoError(t, err)
		done <- n
	}()
	time.Sleep(10 * time.Millisecond) // let it sleep

	require.NoError(t, soft.InjectEvent(e.id, verbs.Event{Type: verbs.EventMulticastError, MGID: m.MGID}))
	select {
	case n := <-done:
		require.Equal(t, 1, n, "events the woken WaitPoll found")
	case <-time.After(5 * time.Second):
		t.Fatal("WaitPoll not woken by an event")
	}
	ev := evs[0]
	assert.Equal(t, verbs.EventMulticastError, ev.Type)
	assert.Equal(t, m.MGID, ev.MGID)
	_, ok, err = ch.Next()
	require.NoError(t, err)
	assert.False(t, ok, "the event was taken by WaitPoll")
	w.Wake()
	n, err := w.WaitPoll(evs)
	assert.NoError(t, err)
	assert.Zero(t, n, "WaitPoll after Wake with nothing queued")
	e.send(ah, m.RemoteQPN, []byte("still works"), 0, 0)

	require.NoError(t, soft.InjectEvent(e.id, verbs.Event{Type: verbs.EventDeviceRemoval}))
	ev, ok, _ = ch.Next()
	require.True(t, ok)
	assert.Equal(t, verbs.EventDeviceRemoval, ev.Type)
	_, err = e.qp.PostSend([]verbs.SendWR{{SGE: e.sendSGE(0, 1), AH: ah, RemoteQPN: m.RemoteQPN}})
	assert.ErrorIs(t, err, verbs.ErrDeviceRemoved)
	_, err = e.qp.RecvCQ().Poll(make([]verbs.WC, 1))
	assert.ErrorIs(t, err, verbs.ErrDeviceRemoved)
	_, err = e.qp.PostRecv([]verbs.RecvWR{{SGE: e.recvSGE(0)}})
	assert.ErrorIs(t, err, verbs.ErrDeviceRemoved)

	assert.Error(t, soft.InjectEvent(nil, verbs.Event{}))
}

func TestClosedObjects(t *testing.T) {
	p := soft.Provider{}
	id, err := p.Bind(verbs.BindConfig{})
	require.NoError(t, err)
	qp, err := id.CreateQP(verbs.QPConfig{})
	require.NoError(t, err)
	require.NoError(t, id.Close())
	// Each returns a count of 0 with the error: callers (rdmanet's
	// reapUntil) take the count's completions before they look at it.
	n, err := qp.PostSend(nil)
	assert.ErrorIs(t, err, verbs.ErrClosed)
	assert.Zero(t, n, "PostSend")
	n, err = qp.PostRecv(nil)
	assert.ErrorIs(t, err, verbs.ErrClosed)
	assert.Zero(t, n, "PostRecv")
	n, err = qp.RecvCQ().Poll(make([]verbs.WC, 1))
	assert.ErrorIs(t, err, verbs.ErrClosed)
	assert.Zero(t, n, "the receive CQ's Poll")
	n, err = qp.SendCQ().Poll(make([]verbs.WC, 1))
	assert.ErrorIs(t, err, verbs.ErrClosed)
	assert.Zero(t, n, "the send CQ's Poll")
	_, _, err = id.Events().Next()
	assert.ErrorIs(t, err, verbs.ErrClosed)
	_, err = id.Join(context.Background(), verbs.Group{IP: net.ParseIP("239.201.1.1")}, verbs.JoinOptions{})
	assert.ErrorIs(t, err, verbs.ErrClosed)
}

func countFds(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(ents)
}

func TestNoFdLeak(t *testing.T) {
	p := soft.Provider{}
	// What the first Bind makes for the process (a QPN block, the
	// namespace's netlink subscription) stays and is no conn's.
	id, err := p.Bind(verbs.BindConfig{})
	require.NoError(t, err)
	require.NoError(t, id.Close())
	before := countFds(t)
	cycles := 1000
	if testing.Short() {
		cycles = 100
	}
	for i := range cycles {
		id, err := p.Bind(verbs.BindConfig{})
		require.NoError(t, err)
		qp, err := id.CreateQP(verbs.QPConfig{SendDepth: 8, RecvDepth: 8})
		require.NoError(t, err)
		_, err = id.Join(context.Background(), verbs.Group{IP: net.IPv4(239, 204, byte(i>>8), byte(i))}, verbs.JoinOptions{})
		require.NoError(t, err)
		_ = qp.RecvCQ().Channel().Fd()
		require.NoError(t, id.Close())
	}
	assert.Equal(t, before, countFds(t), "fds before and after %d Bind/CreateQP/Join/Close cycles", cycles)
}

func TestQPNsUniqueAndReserved(t *testing.T) {
	seen := map[uint32]bool{}
	for range 50 {
		e := newEndpoint(t, verbs.QPConfig{SendDepth: 4, RecvDepth: 4})
		q := e.qp.QPN()
		assert.False(t, seen[q], "QPN %#x twice", q)
		assert.True(t, q >= 2 && q <= 0xFFFFFE, "QPN %#x", q)
		seen[q] = true
	}
}

func TestAllocs(t *testing.T) {
	a := newEndpoint(t, verbs.QPConfig{})
	s := newEndpoint(t, verbs.QPConfig{})
	m, _ := a.join("239.205.5.5", false)
	_, ah := s.join("239.205.5.5", true)
	send := []verbs.SendWR{{SGE: s.sendSGE(0, 64), AH: ah, RemoteQPN: m.RemoteQPN, RemoteQKey: m.QKey, Flags: verbs.SendSignaled}}
	recv := make([]verbs.RecvWR, 1)
	wcs := make([]verbs.WC, 4)
	a.postRecvs(0, 8)
	// Warm the ICRC solve table for this length.
	s.send(ah, m.RemoteQPN, make([]byte, 64), 0, 0)
	require.Len(t, a.recv(1, time.Second), 1)

	allocs := testing.AllocsPerRun(200, func() {
		if _, err := s.qp.PostSend(send); err != nil {
			t.Fatal(err)
		}
		if n, _ := s.qp.SendCQ().Poll(wcs); n != 1 {
			t.Fatalf("send completions %d, want 1", n)
		}
	})
	assert.Zero(t, allocs, "PostSend+Poll(send CQ) allocations")
	// 201 messages now wait; receive them one at a time.
	allocs = testing.AllocsPerRun(200, func() {
		n, err := a.qp.RecvCQ().Poll(wcs[:1])
		if err != nil || n != 1 {
			t.Fatalf("Poll: %d, %v", n, err)
		}
		recv[0] = verbs.RecvWR{WRID: wcs[0].WRID, SGE: a.recvSGE(int(wcs[0].WRID))}
		if _, err := a.qp.PostRecv(recv); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs, "Poll(recv CQ)+PostRecv allocations")
}

// boundToRoCE reports whether socket fd is bound to port 4791:
// /proc/net/udp lists the namespace's UDP sockets, the local address as
// hex IP:port and the inode tenth, and fd's inode is its fstat's. It
// looks at one socket, so other tests' sockets, in this process or
// another, opening or closing meanwhile, do not count.
func boundToRoCE(t *testing.T, fd int) bool {
	t.Helper()
	if fd < 0 {
		return false
	}
	var st unix.Stat_t
	require.NoError(t, unix.Fstat(fd, &st))
	ino := strconv.FormatUint(st.Ino, 10)
	b, err := os.ReadFile("/proc/thread-self/net/udp")
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n")[1:] {
		if f := strings.Fields(line); len(f) > 9 && f[9] == ino {
			return strings.HasSuffix(f[1], fmt.Sprintf(":%04X", roce.UDPPort))
		}
	}
	return false
}

// TestMulticastSocketBoundOnlyToReceive: a QP's multicast socket takes
// port 4791 (where the kernel looks at it for every multicast datagram)
// only once the QP joins a group to receive; a send-only join leaves it
// unbound. Its unicast socket holds the port from the start.
func TestMulticastSocketBoundOnlyToReceive(t *testing.T) {
	e := newEndpoint(t, verbs.QPConfig{})
	mc := soft.MulticastFd(e.qp)
	assert.True(t, boundToRoCE(t, soft.UnicastFd(e.qp)), "a new QP: its unicast socket")
	assert.False(t, boundToRoCE(t, mc), "a new QP: its multicast socket")
	e.join("239.202.7.1", true)
	assert.False(t, boundToRoCE(t, mc), "after a send-only join")
	e.join("239.202.7.2", false)
	assert.True(t, boundToRoCE(t, mc), "after a join to receive")
	e.join("239.202.7.3", false)
	assert.Equal(t, mc, soft.MulticastFd(e.qp), "a second group shares the socket")
	assert.True(t, boundToRoCE(t, mc), "after a second join to receive")
}

// TestPortTakenSaysWhy: EADDRINUSE on port 4791 says who holds it: the
// kernel's Soft-RoCE, which binds it in a namespace where it runs,
// another process, or, when neither is found, how to find out. (The real
// holders are in TestPortHolderIsFound.)
func TestPortTakenSaysWhy(t *testing.T) {
	for _, c := range []struct {
		name      string
		pid       int
		comm      string
		rxe       bool
		want, not string
	}{
		{"rxe", 0, "", true, "the kernel's Soft-RoCE (rdma_rxe) binds it", "process"},
		{"process", 4242, "mckey", false, "process 4242 (mckey) holds it", "Soft-RoCE"},
		{"self", os.Getpid(), "soft.test", false, "another socket of this process", "Soft-RoCE"},
		{"unknown", 0, "", false, "ss -ulpn", "Soft-RoCE"},
	} {
		restore := soft.FakePortHolder(c.pid, c.comm, c.rxe)
		err := soft.BindError([4]byte{127, 1, 2, 3}, unix.EADDRINUSE)
		restore()
		require.ErrorIs(t, err, unix.EADDRINUSE, c.name)
		assert.ErrorContains(t, err, "bind 127.1.2.3:4791", c.name)
		assert.ErrorContains(t, err, c.want, c.name)
		assert.NotContains(t, err.Error(), c.not, c.name)
	}
	err := soft.BindError([4]byte{}, unix.EACCES)
	require.ErrorIs(t, err, unix.EACCES)
	assert.NotContains(t, err.Error(), "Soft-RoCE")
	assert.NoError(t, soft.BindError([4]byte{}, nil))
}

// TestPortHolderIsFound: with another process holding UDP 4791 (a child
// of this test binary, bound to 0.0.0.0:4791 without SO_REUSEADDR), a
// software QP's bind fails naming that process. It runs in a network
// namespace of its own, re-executing itself under `unshare -n` (root).
func TestPortHolderIsFound(t *testing.T) {
	if !testenv.InOwnNetns(t) {
		return
	}
	child := exec.Command(os.Args[0])
	child.Env = append(os.Environ(), holdPortEnv+"=1")
	stdout, err := child.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, child.Start())
	defer func() { child.Process.Kill(); child.Wait() }()
	line := make([]byte, 64)
	n, err := stdout.Read(line)
	require.NoError(t, err)
	require.Equal(t, "holding\n", string(line[:n]))

	id, err := soft.Provider{}.Bind(verbs.BindConfig{})
	require.NoError(t, err)
	defer id.Close()
	_, err = id.CreateQP(verbs.QPConfig{}) // binds 127.q.q.q:4791
	require.ErrorIs(t, err, unix.EADDRINUSE)
	comm := filepath.Base(os.Args[0])
	comm = comm[:min(15, len(comm))] // TASK_COMM_LEN
	assert.ErrorContains(t, err, fmt.Sprintf("process %d (%s) holds it", child.Process.Pid, comm))
}

// TestPortHolderIsPID1: a process that is pid 1 (as in a container)
// holding UDP 4791 on a socket of its own is named as this process, not
// taken for none found. It runs as pid 1 of a PID and network namespace
// of its own (unshare -n -p -f --mount-proc, root), binds 0.0.0.0:4791
// without SO_REUSEADDR, and makes a QP.
func TestPortHolderIsPID1(t *testing.T) {
	if os.Getenv(testenv.EnvNetns) != t.Name() {
		if os.Geteuid() != 0 {
			t.Skip("needs root: it runs in PID and network namespaces of its own")
		}
		args := append([]string{"-n", "-p", "-f", "--mount-proc", "sh", "-c", `ip link set lo up && exec "$0" "$@"`, os.Args[0]},
			testenv.ChildTestArgs(t)...)
		cmd := exec.Command("unshare", args...)
		cmd.Env = append(os.Environ(), testenv.EnvNetns+"="+t.Name(), "RDMANET_BACKEND=")
		out, err := cmd.CombinedOutput()
		t.Logf("as pid 1:\n%s", out)
		require.NoError(t, err, "as pid 1")
		require.Contains(t, string(out), "--- PASS: "+t.Name())
		return
	}
	require.Equal(t, 1, os.Getpid())
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(fd)
	require.NoError(t, unix.Bind(fd, &unix.SockaddrInet4{Port: 4791}))
	id, err := soft.Provider{}.Bind(verbs.BindConfig{})
	require.NoError(t, err)
	defer id.Close()
	_, err = id.CreateQP(verbs.QPConfig{})
	require.ErrorIs(t, err, unix.EADDRINUSE)
	assert.ErrorContains(t, err, "another socket of this process (pid 1)")
}

// vxlanOn4791 makes a VXLAN netdev whose UDP port is 4791, up: the
// kernel binds 0.0.0.0:4791 for it, a socket no process holds, as
// rdma_rxe's is.
var vxlanOn4791 = []string{"ip link add rv0 type vxlan id 1 dstport 4791 local 127.0.0.1", "ip link set rv0 up"}

// TestPortHolderIsKernelSocket: with UDP 4791 held by a kernel socket (a
// VXLAN netdev's), a software QP's bind fails naming no process: the
// kernel's Soft-RoCE only where rdma_rxe is loaded, else how to find out.
func TestPortHolderIsKernelSocket(t *testing.T) {
	if !testenv.IsNetnsChild(t) && os.Geteuid() == 0 {
		script := "ip link set lo up && " + strings.Join(vxlanOn4791, " && ")
		if out, err := exec.Command("unshare", "-n", "sh", "-c", script).CombinedOutput(); err != nil {
			t.Skipf("no VXLAN netdev to hold the port: %v: %s", err, out)
		}
	}
	if !testenv.InOwnNetns(t, vxlanOn4791...) {
		return
	}
	_, statErr := os.Stat("/sys/module/rdma_rxe")
	rxe := statErr == nil
	id, err := soft.Provider{}.Bind(verbs.BindConfig{})
	require.NoError(t, err)
	defer id.Close()
	_, err = id.CreateQP(verbs.QPConfig{})
	require.ErrorIs(t, err, unix.EADDRINUSE)
	assert.NotContains(t, err.Error(), "holds it in this network namespace", "a process named")
	assert.NotContains(t, err.Error(), "this process", "this process named")
	if rxe {
		assert.ErrorContains(t, err, "the kernel's Soft-RoCE (rdma_rxe) binds it")
	} else {
		assert.ErrorContains(t, err, "a kernel socket holds it", "rdma_rxe is not loaded")
		assert.NotContains(t, err.Error(), "Soft-RoCE", "rdma_rxe is not loaded")
	}
}

// TestTransparentWhereAllowed: a QP's unicast socket has IP_TRANSPARENT
// exactly when the process may set it, and sends and receives either way
// (the rest of the suite runs as root in CI and as an unprivileged user
// in the checks the README lists).
func TestTransparentWhereAllowed(t *testing.T) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(fd)
	allowed := unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_TRANSPARENT, 1) == nil
	a := newEndpoint(t, verbs.QPConfig{})
	b := newEndpoint(t, verbs.QPConfig{})
	assert.Equal(t, allowed, soft.Transparent(a.qp), "IP_TRANSPARENT where allowed (%v)", allowed)
	b.postRecvs(0, 1)
	wc := a.unicastTo(b, []byte("either way"))
	assert.Equal(t, []byte("either way"), b.buf(wc)[verbs.GRHSize:])
	assert.Equal(t, a.id.Local().IP.To4(), net.IP(b.buf(wc)[32:36]), "GRH source: the QP's own address")
}
