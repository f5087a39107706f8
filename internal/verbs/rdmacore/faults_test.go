//go:build linux

package rdmacore_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/testenv"
	"github.com/go-rdma/rdmanet/internal/verbs"
)

// privateRXE makes a Soft-RoCE device of its own on a private veth pair
// (dev0/dev1, addr/24 on dev0), so that a test may flap or delete it
// without disturbing the harness's rxe0 and rxe1. It returns the run
// helper. The device is deleted at cleanup, after every ID bindWhenReady
// made on it has seen DEVICE_REMOVAL and closed: librdmacm lets go of a
// device's verbs context only then, and the deletion waits for that.
func privateRXE(t *testing.T, d testDev, rxe, dev string, addr net.IP) func(args ...string) {
	t.Helper()
	if !strings.HasPrefix(d.name, "rxe") || os.Geteuid() != 0 {
		t.Skip("needs root and Soft-RoCE (RDMANET_TEST_DEVICE=rxe*)")
	}
	run := func(args ...string) {
		t.Helper()
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		require.NoError(t, err, "%s: %s", strings.Join(args, " "), out)
	}
	run("ip", "link", "add", dev+"0", "type", "veth", "peer", "name", dev+"1")
	t.Cleanup(func() { exec.Command("ip", "link", "del", dev+"0").Run() })
	run("ip", "addr", "add", addr.String()+"/24", "dev", dev+"0")
	run("ip", "link", "set", dev+"0", "up")
	run("ip", "link", "set", dev+"1", "up")
	run("rdma", "link", "add", rxe, "type", "rxe", "netdev", dev+"0")
	t.Cleanup(func() {
		done := make(chan error, 1)
		go func() { done <- exec.Command("rdma", "link", "delete", rxe).Run() }()
		for _, id := range privateIDs[t] {
			waitEvent(t, id, verbs.EventDeviceRemoval, 5*time.Second)
			id.Close()
		}
		delete(privateIDs, t)
		for _, f := range privateAfter[t] {
			f()
		}
		delete(privateAfter, t)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("rdma link delete %s: %v", rxe, err)
			}
		case <-time.After(20 * time.Second):
			t.Errorf("rdma link delete %s did not finish", rxe)
		}
	})
	return run
}

// privateIDs are the IDs bound on a test's private device.
var privateIDs = map[*testing.T][]verbs.ID{}

// privateAfter runs after those IDs closed (freeing arenas they
// registered).
var privateAfter = map[*testing.T][]func(){}

// bindWhenReady binds to addr once its GID is there.
func bindWhenReady(t *testing.T, d testDev, addr net.IP) verbs.ID {
	t.Helper()
	var id verbs.ID
	var err error
	for start := time.Now(); time.Since(start) < 10*time.Second; time.Sleep(100 * time.Millisecond) {
		if id, err = d.p.Bind(verbs.BindConfig{Addr: addr}); err == nil {
			privateIDs[t] = append(privateIDs[t], id)
			return id
		}
	}
	require.NoError(t, err, "Bind to %s", addr)
	return nil
}

// waitEvent waits for an event of type want on id, returning the others
// seen on the way.
func waitEvent(t *testing.T, id verbs.ID, want verbs.EventType, d time.Duration) (bool, []verbs.Event) {
	t.Helper()
	var seen []verbs.Event
	for start := time.Now(); time.Since(start) < d; {
		fds := []unix.PollFd{{Fd: int32(id.Events().Fd()), Events: unix.POLLIN}}
		unix.Poll(fds, 50)
		for {
			ev, ok, err := id.Events().Next()
			if err != nil || !ok {
				break
			}
			seen = append(seen, ev)
			if ev.Type == want {
				return true, seen
			}
		}
	}
	return false, seen
}

// TestDeviceLinkFlap: with the netdev under a port down, the port's async
// events say PORT_ERR and a UD send fails and leaves the QP out of RTS
// (rxe puts it in ERR); with the netdev up again, PORT_ACTIVE comes, Reset
// brings the same QP back to RTS, and it sends to and receives from
// itself again.
func TestDeviceLinkFlap(t *testing.T) {
	d := needDevice(t)
	// Tests that delete a device run in a process of their own
	// (testenv.InChild): librdmacm's device list stays behind in the
	// process that saw a device go, and later binds there can block.
	if !testenv.InChild(t) {
		return
	}
	addr := net.IPv4(10, 95, 0, 1)
	run := privateRXE(t, d, "rnfl", "rnfl", addr)
	id := bindWhenReady(t, d, addr)
	// A second ID on the same device: the async events reach every ID.
	other := bindWhenReady(t, d, addr)
	q, err := id.CreateQP(verbs.QPConfig{})
	require.NoError(t, err)
	e := &endpoint{id: id, qp: q}
	e.arena, err = verbs.NewArena(64 * slot)
	require.NoError(t, err)
	privateAfter[t] = append(privateAfter[t], func() { e.arena.Free() })
	e.mr, err = q.RegisterMemory(e.arena)
	require.NoError(t, err)
	b := id.Local()
	ah, err := q.CreateAH(verbs.AHAttr{DGID: b.GID, SGIDIndex: uint8(b.GIDIndex), HopLimit: 64, IsGlobal: true})
	require.NoError(t, err)
	e.postRecvs(t, 0, 4)
	e.send(t, ah, q.QPN(), q.QKey(), []byte("before"), 0, 0)
	require.NotNil(t, waitWC(t, q.RecvCQ(), 5*time.Second), "no receive before the flap")

	run("ip", "link", "set", "rnfl0", "down")
	ok, seen := waitEvent(t, id, verbs.EventPortError, 5*time.Second)
	require.True(t, ok, "no PORT_ERR after link down; events: %v", seen)
	ok, seen = waitEvent(t, other, verbs.EventPortError, 5*time.Second)
	require.True(t, ok, "the second ID got no PORT_ERR; events: %v", seen)

	// A send now fails; rxe moves the QP to ERR.
	n, err := q.PostSend([]verbs.SendWR{{WRID: 7, SGE: verbs.SGE{Offset: 63 * slot, Length: 5, LKey: e.mr.LKey()},
		AH: ah, RemoteQPN: q.QPN(), RemoteQKey: q.QKey(), Flags: verbs.SendSignaled}})
	r := q // Ready and Reset are the QP's own
	if err == nil && n == 1 {
		wc := waitWC(t, q.SendCQ(), 5*time.Second)
		require.NotNil(t, wc, "no completion for a send with the link down")
		t.Logf("send with the link down: %v", wc.Status)
		require.NotEqual(t, verbs.WCSuccess, wc.Status, "a send with the link down succeeded")
	} else {
		t.Logf("post with the link down: %d, %v", n, err)
	}
	ready, err := r.Ready()
	require.NoError(t, err)
	require.False(t, ready, "QP still in RTS after a failed send")

	run("ip", "link", "set", "rnfl0", "up")
	ok, seen = waitEvent(t, id, verbs.EventPortActive, 5*time.Second)
	require.True(t, ok, "no PORT_ACTIVE after link up; events: %v", seen)
	qpn := q.QPN()
	require.NoError(t, r.Reset())
	ready, err = r.Ready()
	require.NoError(t, err)
	require.True(t, ready, "QP not in RTS after Reset")
	require.Equal(t, qpn, q.QPN())
	for waitWC(t, q.RecvCQ(), 100*time.Millisecond) != nil {
		// flushed receives, if the device reports them
	}
	e.postRecvs(t, 8, 4)
	// Routes and neighbours come back with the link: retry a while.
	deadline := time.Now().Add(5 * time.Second)
	for {
		copy(e.arena.Slice(63*slot, 5), "after")
		n, err := q.PostSend([]verbs.SendWR{{WRID: 8, SGE: verbs.SGE{Offset: 63 * slot, Length: 5, LKey: e.mr.LKey()},
			AH: ah, RemoteQPN: q.QPN(), RemoteQKey: q.QKey(), Flags: verbs.SendSignaled}})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		wc := waitWC(t, q.SendCQ(), 5*time.Second)
		require.NotNil(t, wc)
		if wc.Status == verbs.WCSuccess {
			break
		}
		require.True(t, time.Now().Before(deadline), "sends still fail after link up and Reset: %v", wc.Status)
		require.NoError(t, r.Reset())
		time.Sleep(100 * time.Millisecond)
	}
	wc := waitWC(t, q.RecvCQ(), 5*time.Second)
	require.NotNil(t, wc, "no receive after Reset")
	require.Equal(t, verbs.WCSuccess, wc.Status)
	require.Equal(t, "after", string(e.arena.Slice(uint32(wc.WRID)*slot+verbs.GRHSize, 5)))
}

// TestDeviceNetdevChangesEvents tries what might make rdma_cm report
// MULTICAST_ERROR for a joined group on rxe: removing and re-adding the
// address, changing the MTU, leaving while another ID joins. On RoCE,
// rdma_cm's joins never involve a subnet administrator (cma_iboe_join_
// multicast only computes the MGID and joins the IP group), and only the
// SA's multicast module raises MULTICAST_ERROR after a join: none comes.
// The test holds the events to what they are and logs them.
func TestDeviceNetdevChangesEvents(t *testing.T) {
	d := needDevice(t)
	if !testenv.InChild(t) { // as above
		return
	}
	addr := net.IPv4(10, 94, 0, 1)
	run := privateRXE(t, d, "rnev", "rnev", addr)
	id := bindWhenReady(t, d, addr)
	_, err := id.CreateQP(verbs.QPConfig{})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g := verbs.Group{IP: net.IPv4(239, 7, 7, 11)}
	_, err = id.Join(ctx, g, verbs.JoinOptions{})
	require.NoError(t, err)
	racer := bindWhenReady(t, d, addr)
	_, err = racer.CreateQP(verbs.QPConfig{})
	require.NoError(t, err)

	collect := func(what string) []verbs.Event {
		_, seen := waitEvent(t, id, verbs.EventType(-1), 500*time.Millisecond)
		t.Logf("%s: events %v", what, seen)
		return seen
	}
	var all []verbs.Event
	run("ip", "addr", "del", addr.String()+"/24", "dev", "rnev0")
	all = append(all, collect("address removed")...)
	run("ip", "addr", "add", addr.String()+"/24", "dev", "rnev0")
	all = append(all, collect("address added")...)
	run("ip", "link", "set", "rnev0", "mtu", "1200")
	all = append(all, collect("MTU 1200")...)
	run("ip", "link", "set", "rnev0", "mtu", "1500")
	all = append(all, collect("MTU 1500")...)
	for i := 0; i < 5; i++ {
		m, err := racer.Join(ctx, g, verbs.JoinOptions{})
		require.NoError(t, err)
		require.NoError(t, racer.Leave(m.MGID))
	}
	all = append(all, collect("leave races")...)
	for _, ev := range all {
		require.Contains(t, []verbs.EventType{verbs.EventAddrChange, verbs.EventPortError, verbs.EventPortActive,
			verbs.EventMulticastError}, ev.Type, "event %v", ev)
	}
}
