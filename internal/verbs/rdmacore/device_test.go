//go:build linux

package rdmacore_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/infiniband"
	"github.com/go-rdma/rdmanet/internal/infiniband/sysfs"
	"github.com/go-rdma/rdmanet/internal/testenv"
	"github.com/go-rdma/rdmanet/internal/verbs"
)

// Device tests run when testenv.Device names a device (rxe0 in
// `make test-rxe`) and testenv.Addr its address; named but missing is a
// failure, not a skip.

type testDev struct {
	p    verbs.Provider
	name string
	addr net.IP
}

func needDevice(t *testing.T) testDev {
	t.Helper()
	testenv.NeedDevice(t) // skips without a device, fails when it is missing
	name := testenv.Device()
	addr := net.ParseIP(testenv.Addr())
	if addr == nil {
		t.Fatalf("%s=%s needs %s (the device's IP address), got %q", testenv.EnvDevice, name, testenv.EnvAddr, testenv.Addr())
	}
	p := rdmaCore(t)
	if err := p.Available(); err != nil {
		t.Fatalf("%s=%s but rdma-core is not available: %v", testenv.EnvDevice, name, err)
	}
	devs, err := p.Devices()
	require.NoError(t, err)
	for _, d := range devs {
		if d.Name == name {
			return testDev{p: p, name: name, addr: addr}
		}
	}
	t.Fatalf("%s=%s not found; devices: %+v", testenv.EnvDevice, name, devs)
	return testDev{}
}

// endpoint is a bound ID with a QP, a registered arena and receives.
type endpoint struct {
	id    verbs.ID
	qp    verbs.QP
	arena *verbs.Arena
	mr    verbs.MR
}

const slot = 4096

func newEndpoint(t *testing.T, d testDev, cfg verbs.QPConfig) *endpoint {
	t.Helper()
	id, err := d.p.Bind(verbs.BindConfig{Addr: d.addr})
	require.NoError(t, err)
	t.Cleanup(func() { id.Close() })
	qp, err := id.CreateQP(cfg)
	require.NoError(t, err)
	a, err := verbs.NewArena(64 * slot)
	require.NoError(t, err)
	mr, err := qp.RegisterMemory(a)
	require.NoError(t, err)
	e := &endpoint{id: id, qp: qp, arena: a, mr: mr}
	t.Cleanup(func() {
		id.Close()
		a.Free()
	})
	return e
}

// postRecvs posts n receive slots, 0..n-1, with WRID = slot index.
func (e *endpoint) postRecvs(t *testing.T, first, n int) {
	t.Helper()
	wrs := make([]verbs.RecvWR, n)
	for i := range wrs {
		wrs[i] = verbs.RecvWR{WRID: uint64(first + i), SGE: verbs.SGE{Offset: uint32((first + i) * slot), Length: slot, LKey: e.mr.LKey()}}
	}
	got, err := e.qp.PostRecv(wrs)
	require.NoError(t, err)
	require.Equal(t, n, got)
}

// send posts one signaled send of payload from slot 63.
func (e *endpoint) send(t *testing.T, ah verbs.AH, qpn, qkey uint32, payload []byte, flags verbs.SendFlags, imm uint32) {
	t.Helper()
	off := uint32(63 * slot)
	copy(e.arena.Slice(off, uint32(len(payload))), payload)
	n, err := e.qp.PostSend([]verbs.SendWR{{
		WRID: 999, SGE: verbs.SGE{Offset: off, Length: uint32(len(payload)), LKey: e.mr.LKey()},
		AH: ah, RemoteQPN: qpn, RemoteQKey: qkey, Imm: imm, Flags: flags | verbs.SendSignaled,
	}})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	wc := waitWC(t, e.qp.SendCQ(), 5*time.Second)
	require.NotNil(t, wc, "no send completion")
	require.Equal(t, verbs.WCSuccess, wc.Status, "send completion: %v", wc.Status)
	require.Equal(t, verbs.WCSend, wc.Opcode)
	require.Equal(t, uint64(999), wc.WRID)
}

// waitWC waits for one completion the way rdmanet does: poll, arm, poll
// again, then sleep in poll(2) on the channel fd, drain and ack the
// channel's events. nil after timeout.
func waitWC(t *testing.T, cq verbs.CQ, timeout time.Duration) *verbs.WC {
	t.Helper()
	wcs := make([]verbs.WC, 1)
	deadline := time.Now().Add(timeout)
	ch := cq.Channel()
	for {
		n, err := cq.Poll(wcs)
		require.NoError(t, err)
		if n == 1 {
			return &wcs[0]
		}
		require.NoError(t, cq.ReqNotify())
		if n, _ = cq.Poll(wcs); n == 1 {
			return &wcs[0]
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil
		}
		fds := []unix.PollFd{{Fd: int32(ch.Fd()), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, int(left/time.Millisecond)+1); err != nil && err != unix.EINTR {
			t.Fatalf("poll channel fd: %v", err)
		}
		ev, err := ch.GetEvents()
		require.NoError(t, err)
		ch.AckEvents(ev)
	}
}

func TestDeviceDevices(t *testing.T) {
	d := needDevice(t)
	devs, err := d.p.Devices()
	require.NoError(t, err)
	var dev *verbs.DeviceAttr
	for i := range devs {
		if devs[i].Name == d.name {
			dev = &devs[i]
		}
	}
	require.NotNil(t, dev)
	assert.Equal(t, verbs.RDMACore, dev.Provider)
	assert.Greater(t, dev.MaxMcastGroups, 0)
	assert.Greater(t, dev.MaxQPWR, 0)
	assert.NotZero(t, dev.NodeGUID)
	require.NotEmpty(t, dev.Ports)
	port := dev.Ports[0]
	assert.Equal(t, 1, port.Port)
	assert.Equal(t, infiniband.PortActive, port.State)
	assert.Contains(t, []int{256, 512, 1024, 2048, 4096}, port.ActiveMTU)
	want := infiniband.GIDFromNetIP(d.addr)
	found := false
	for _, g := range port.GIDs {
		assert.False(t, g.GID.IsZero(), "zero GID listed at %d", g.Index)
		if g.GID == want && (port.LinkLayer == infiniband.LinkLayerInfiniBand || g.Type == infiniband.GIDTypeRoCEv2) {
			found = true
		}
	}
	assert.True(t, found, "no RoCE v2 GID %s in %+v", want, port.GIDs)
	t.Logf("%s: %+v", d.name, *dev)

	// The sysfs side is internal/infiniband's: the same GID table, netdev and MTU.
	sys, err := sysfs.Discover("/")
	require.NoError(t, err)
	sp := sys.Port(d.name, 1)
	require.NotNil(t, sp)
	var gids []infiniband.GIDEntry
	gids = append(gids, sp.GIDs...)
	assert.Equal(t, gids, port.GIDs)
	assert.Contains(t, sp.Netdevs, port.Netdev)
	if port.LinkLayer == infiniband.LinkLayerEthernet {
		assert.LessOrEqual(t, port.ActiveMTU, sp.ActiveMTU, "no more than the netdev's RoCE MTU")
	}
}

func TestDeviceBind(t *testing.T) {
	d := needDevice(t)
	id, err := d.p.Bind(verbs.BindConfig{Addr: d.addr})
	require.NoError(t, err)
	defer id.Close()
	b := id.Local()
	t.Logf("binding: %+v", b)
	assert.Equal(t, d.name, b.Device)
	assert.Equal(t, 1, b.Port)
	assert.True(t, b.IP.Equal(d.addr))
	assert.Equal(t, infiniband.GIDFromNetIP(d.addr), b.GID)
	assert.NotEmpty(t, b.Netdev)
	if b.LinkLayer == infiniband.LinkLayerEthernet {
		assert.Equal(t, infiniband.GIDTypeRoCEv2, b.GIDType)
	}
	assert.Contains(t, []int{256, 512, 1024, 2048, 4096}, b.MTU)
	if sys, err := sysfs.Discover("/"); assert.NoError(t, err) {
		want, err := sys.PortForIP(netip.MustParseAddr(d.addr.String()))
		require.NoError(t, err)
		assert.Equal(t, sysfs.Binding{Device: b.Device, Port: b.Port, GIDIndex: b.GIDIndex, GID: b.GID,
			GIDType: b.GIDType, Netdev: b.Netdev}, want, "Bind vs infiniband.PortForIP")
	}

	assert.True(t, d.p.Serves(verbs.BindConfig{Addr: d.addr}), "Serves(%s)", d.addr)
	assert.False(t, d.p.Serves(verbs.BindConfig{}), "Serves(loopback)")
	_, err = d.p.Bind(verbs.BindConfig{})
	assert.True(t, errors.Is(err, verbs.ErrNoDevice), "Bind(loopback): got %v, want ErrNoDevice", err)
	_, err = d.p.Bind(verbs.BindConfig{Addr: d.addr, Device: "nosuchdev0"})
	assert.True(t, errors.Is(err, verbs.ErrNoDevice), "Bind with the wrong Device: got %v", err)

	ev, ok, err := id.Events().Next()
	assert.NoError(t, err)
	assert.False(t, ok, "unexpected event %+v", ev)
	assert.Greater(t, id.Events().Fd(), 0)

	require.NoError(t, id.Close())
	require.NoError(t, id.Close(), "second Close")
	_, err = id.CreateQP(verbs.QPConfig{})
	assert.True(t, errors.Is(err, verbs.ErrClosed), "CreateQP after Close: got %v", err)
}

func TestDeviceQP(t *testing.T) {
	d := needDevice(t)
	e := newEndpoint(t, d, verbs.QPConfig{MaxInline: 64, QKey: 0x11223344, BlockSelfMulticastLoopback: true})
	assert.NotZero(t, e.qp.QPN())
	assert.Equal(t, uint32(0x11223344), e.qp.QKey(), "Q_Key set with ibv_modify_qp")
	assert.GreaterOrEqual(t, e.qp.MaxInline(), 64)
	t.Logf("QPN %#x, max inline %d, loopback blocked %v", e.qp.QPN(), e.qp.MaxInline(), e.qp.LoopbackBlocked())
	if d.name[:3] == "rxe" {
		assert.False(t, e.qp.LoopbackBlocked(), "rxe refuses IBV_QP_CREATE_BLOCK_SELF_MCAST_LB")
	}
	for _, cq := range []verbs.CQ{e.qp.SendCQ(), e.qp.RecvCQ()} {
		fd := cq.Channel().Fd()
		fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
		require.NoError(t, err)
		assert.NotZero(t, fl&unix.O_NONBLOCK, "channel fd %d is blocking", fd)
		n, err := cq.Channel().GetEvents()
		assert.NoError(t, err)
		assert.Zero(t, n)
	}
	assert.NotEqual(t, e.qp.SendCQ().Channel().Fd(), e.qp.RecvCQ().Channel().Fd())
	_, err := e.id.CreateQP(verbs.QPConfig{})
	assert.Error(t, err, "a second QP on one ID")
}

func TestDeviceMulticastLoopback(t *testing.T) {
	d := needDevice(t)
	e := newEndpoint(t, d, verbs.QPConfig{MaxInline: 64})
	e.postRecvs(t, 0, 16)
	group := net.IPv4(239, 7, 7, 7)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := e.id.Join(ctx, verbs.Group{IP: group}, verbs.JoinOptions{})
	require.NoError(t, err)
	t.Logf("membership: %+v", m)
	assert.Equal(t, infiniband.GIDFromNetIP(group), m.MGID)
	assert.Equal(t, verbs.MulticastQPN, m.RemoteQPN)
	assert.Equal(t, verbs.DefaultQKey, m.QKey)
	assert.True(t, m.AH.IsGlobal)
	assert.Equal(t, m.MGID, m.AH.DGID)
	assert.Equal(t, e.id.Local().MTU, m.MTU)
	assert.Equal(t, uint8(e.id.Local().GIDIndex), m.AH.SGIDIndex, "rdma_cm's SGID index vs ours")

	ah, err := e.qp.CreateAH(m.AH)
	require.NoError(t, err)
	payload := []byte("hello, rdma multicast")
	e.send(t, ah, m.RemoteQPN, m.QKey, payload, verbs.SendInline|verbs.SendWithImm, 0x01020304)

	wc := waitWC(t, e.qp.RecvCQ(), 5*time.Second)
	if e.qp.LoopbackBlocked() {
		assert.Nil(t, wc, "loopback is blocked but the QP got its own message")
		return
	}
	require.NotNil(t, wc, "the QP did not receive its own multicast (loopback)")
	assert.Equal(t, verbs.WCSuccess, wc.Status)
	assert.Equal(t, verbs.WCRecv, wc.Opcode)
	assert.Equal(t, uint32(verbs.GRHSize+len(payload)), wc.ByteLen)
	assert.NotZero(t, wc.Flags&verbs.WCGRH, "no GRH flag")
	assert.NotZero(t, wc.Flags&verbs.WCWithImm, "no imm flag")
	assert.Equal(t, uint32(0x01020304), wc.Imm, "imm is a host value")
	assert.Equal(t, e.qp.QPN(), wc.SrcQP)
	assert.Equal(t, e.qp.QPN(), wc.QPN)
	buf := e.arena.Slice(uint32(wc.WRID)*slot, wc.ByteLen)
	assert.Equal(t, payload, buf[verbs.GRHSize:])
	if e.id.Local().GIDType == infiniband.GIDTypeRoCEv2 && d.addr.To4() != nil {
		// RoCE v2 over IPv4: bytes 20-39 of the GRH area are the IPv4 header.
		ip := buf[20:40]
		assert.Equal(t, byte(0x45), ip[0], "IPv4 version/IHL")
		assert.Equal(t, byte(17), ip[9], "protocol UDP")
		assert.Equal(t, []byte(d.addr.To4()), ip[12:16], "source address")
		assert.Equal(t, []byte(group.To4()), ip[16:20], "destination address")
		assert.Equal(t, uint16(20+8+12+8+4+len(payload)+(-len(payload))&3+4), binary.BigEndian.Uint16(ip[2:4]),
			"IPv4 total length: IP+UDP+BTH+DETH+ImmDt+payload+pad+ICRC")
	}

	// Leave: nothing more arrives.
	require.NoError(t, e.id.Leave(m.MGID))
	assert.Error(t, e.id.Leave(m.MGID), "second Leave")
	e.send(t, ah, m.RemoteQPN, m.QKey, payload, 0, 0)
	assert.Nil(t, waitWC(t, e.qp.RecvCQ(), 300*time.Millisecond), "received after Leave")
}

func TestDeviceUnicastToSelf(t *testing.T) {
	d := needDevice(t)
	e := newEndpoint(t, d, verbs.QPConfig{})
	e.postRecvs(t, 0, 4)
	b := e.id.Local()
	ah, err := e.qp.CreateAH(verbs.AHAttr{DGID: b.GID, SGIDIndex: uint8(b.GIDIndex), HopLimit: 64, IsGlobal: true})
	require.NoError(t, err)
	payload := bytes.Repeat([]byte{0xab}, b.MTU) // exactly one MTU
	e.send(t, ah, e.qp.QPN(), e.qp.QKey(), payload, 0, 0)
	wc := waitWC(t, e.qp.RecvCQ(), 5*time.Second)
	require.NotNil(t, wc, "no unicast receive")
	assert.Equal(t, verbs.WCSuccess, wc.Status)
	assert.Equal(t, uint32(verbs.GRHSize+len(payload)), wc.ByteLen)
	assert.Zero(t, wc.Flags&verbs.WCWithImm)
	assert.Equal(t, e.qp.QPN(), wc.SrcQP)
	assert.Equal(t, payload, e.arena.Slice(uint32(wc.WRID)*slot+verbs.GRHSize, uint32(len(payload))))
	require.NoError(t, ah.Close())
	require.NoError(t, ah.Close(), "AH Close is idempotent")
	_, err = e.qp.PostSend([]verbs.SendWR{{SGE: verbs.SGE{Offset: 0, Length: 1, LKey: e.mr.LKey()}, AH: ah}})
	assert.True(t, errors.Is(err, verbs.ErrClosed), "send on a closed AH: got %v", err)
}

// TestDeviceInlineFromGoMemory posts a batch of inline sends whose
// payloads (SendWR.Inline) are Go memory no MR covers, overwrites them
// when PostSend returns, and receives what was posted. An inline payload
// over the QP's MaxInline is refused with EINVAL, the ones before it sent.
func TestDeviceInlineFromGoMemory(t *testing.T) {
	d := needDevice(t)
	e := newEndpoint(t, d, verbs.QPConfig{MaxInline: 128})
	require.GreaterOrEqual(t, e.qp.MaxInline(), 128)
	e.postRecvs(t, 0, 8)
	b := e.id.Local()
	ah, err := e.qp.CreateAH(verbs.AHAttr{DGID: b.GID, SGIDIndex: uint8(b.GIDIndex), HopLimit: 64, IsGlobal: true})
	require.NoError(t, err)
	var want [][]byte
	var wrs []verbs.SendWR
	for i, n := range []int{1, 100, 128, 0} {
		p := bytes.Repeat([]byte{byte('a' + i)}, n)
		want = append(want, bytes.Clone(p))
		wrs = append(wrs, verbs.SendWR{WRID: uint64(i), Inline: p, AH: ah, RemoteQPN: e.qp.QPN(),
			RemoteQKey: e.qp.QKey(), Flags: verbs.SendInline | verbs.SendSignaled,
			SGE: verbs.SGE{LKey: e.mr.LKey()}})
	}
	wrs = append(wrs, verbs.SendWR{WRID: 9, Inline: make([]byte, e.qp.MaxInline()+1), AH: ah,
		RemoteQPN: e.qp.QPN(), RemoteQKey: e.qp.QKey(), Flags: verbs.SendInline | verbs.SendSignaled})
	n, err := e.qp.PostSend(wrs)
	assert.True(t, errors.Is(err, unix.EINVAL), "inline over MaxInline: got %v", err)
	require.Equal(t, 4, n)
	for _, w := range wrs {
		clear(w.Inline)
	}
	for i := range want {
		wc := waitWC(t, e.qp.SendCQ(), 5*time.Second)
		require.NotNil(t, wc, "send completion %d", i)
		require.Equal(t, verbs.WCSuccess, wc.Status)
	}
	for i, w := range want {
		wc := waitWC(t, e.qp.RecvCQ(), 5*time.Second)
		require.NotNil(t, wc, "receive %d", i)
		require.Equal(t, verbs.WCSuccess, wc.Status)
		got := e.arena.Slice(uint32(wc.WRID)*slot+verbs.GRHSize, wc.ByteLen-verbs.GRHSize)
		assert.Equal(t, w, got, "datagram %d", i)
	}
}

func TestDeviceSendOnlyJoin(t *testing.T) {
	d := needDevice(t)
	recv := newEndpoint(t, d, verbs.QPConfig{})
	sender := newEndpoint(t, d, verbs.QPConfig{})
	recv.postRecvs(t, 0, 8)
	sender.postRecvs(t, 0, 8)
	g := verbs.Group{IP: net.IPv4(239, 7, 7, 8)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := recv.id.Join(ctx, g, verbs.JoinOptions{})
	require.NoError(t, err)
	m, err := sender.id.Join(ctx, g, verbs.JoinOptions{SendOnly: true})
	require.NoError(t, err)
	assert.True(t, m.SendOnly)
	ah, err := sender.qp.CreateAH(m.AH)
	require.NoError(t, err)
	sender.send(t, ah, m.RemoteQPN, m.QKey, []byte("to the group"), 0, 0)
	wc := waitWC(t, recv.qp.RecvCQ(), 5*time.Second)
	require.NotNil(t, wc, "the full member got nothing")
	assert.Equal(t, sender.qp.QPN(), wc.SrcQP)
	assert.Nil(t, waitWC(t, sender.qp.RecvCQ(), 300*time.Millisecond), "a send-only member received")
}

func TestDeviceJoinErrors(t *testing.T) {
	d := needDevice(t)
	id, err := d.p.Bind(verbs.BindConfig{Addr: d.addr})
	require.NoError(t, err)
	defer id.Close()
	ctx := context.Background()
	_, err = id.Join(ctx, verbs.Group{IP: net.IPv4(239, 1, 1, 1)}, verbs.JoinOptions{})
	assert.Error(t, err, "Join before CreateQP")
	_, err = id.CreateQP(verbs.QPConfig{})
	require.NoError(t, err)
	if id.Local().GIDType == infiniband.GIDTypeRoCEv2 {
		_, err = id.Join(ctx, verbs.Group{IP: net.ParseIP("ff0e::1234")}, verbs.JoinOptions{})
		assert.True(t, errors.Is(err, verbs.ErrNotSupported), "IPv6 group on RoCE v2: got %v", err)
		assert.ErrorContains(t, err, "IPv6 multicast groups are not supported on RoCE v2 by rdma_cm")
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	_, err = id.Join(done, verbs.Group{IP: net.IPv4(239, 1, 1, 2)}, verbs.JoinOptions{})
	if err != nil { // the join may complete before the first look at ctx
		assert.True(t, errors.Is(err, context.Canceled), "canceled Join: got %v", err)
	}
}

func TestDeviceOversizeSend(t *testing.T) {
	d := needDevice(t)
	e := newEndpoint(t, d, verbs.QPConfig{})
	b := e.id.Local()
	ah, err := e.qp.CreateAH(verbs.AHAttr{DGID: b.GID, SGIDIndex: uint8(b.GIDIndex), HopLimit: 64, IsGlobal: true})
	require.NoError(t, err)
	n, err := e.qp.PostSend([]verbs.SendWR{{
		SGE: verbs.SGE{Offset: 0, Length: uint32(b.MTU + 1), LKey: e.mr.LKey()},
		AH:  ah, RemoteQPN: e.qp.QPN(), RemoteQKey: e.qp.QKey(), Flags: verbs.SendSignaled,
	}})
	assert.Equal(t, 0, n)
	assert.True(t, errors.Is(err, verbs.ErrMessageSize), "got %v, want ErrMessageSize", err)
	assert.Nil(t, waitWC(t, e.qp.SendCQ(), 100*time.Millisecond), "the oversize send reached the QP")

	// An SGE outside the arena is refused before the device sees it.
	_, err = e.qp.PostRecv([]verbs.RecvWR{{SGE: verbs.SGE{Offset: uint32(e.arena.Len()), Length: 64, LKey: e.mr.LKey()}}})
	assert.True(t, errors.Is(err, unix.EINVAL), "receive outside the arena: got %v", err)
}

func TestDeviceNoAllocsOnDataPath(t *testing.T) {
	d := needDevice(t)
	e := newEndpoint(t, d, verbs.QPConfig{SendDepth: 512, RecvDepth: 512})
	b := e.id.Local()
	ah, err := e.qp.CreateAH(verbs.AHAttr{DGID: b.GID, SGIDIndex: uint8(b.GIDIndex), HopLimit: 64, IsGlobal: true})
	require.NoError(t, err)
	recvs := make([]verbs.RecvWR, 8)
	for i := range recvs {
		recvs[i] = verbs.RecvWR{WRID: uint64(i), SGE: verbs.SGE{Offset: uint32(i * slot), Length: slot, LKey: e.mr.LKey()}}
	}
	sends := make([]verbs.SendWR, 8)
	for i := range sends {
		sends[i] = verbs.SendWR{WRID: uint64(i), SGE: verbs.SGE{Offset: uint32(40 * slot), Length: 64, LKey: e.mr.LKey()},
			AH: ah, RemoteQPN: e.qp.QPN(), RemoteQKey: e.qp.QKey(), Flags: verbs.SendSignaled}
	}
	wcs := make([]verbs.WC, 16)
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := e.qp.PostRecv(recvs); err != nil {
			panic(err)
		}
		if _, err := e.qp.PostSend(sends); err != nil {
			panic(err)
		}
		for got := 0; got < len(sends); {
			n, _ := e.qp.SendCQ().Poll(wcs)
			got += n
		}
		for got := 0; got < len(recvs); {
			n, _ := e.qp.RecvCQ().Poll(wcs)
			got += n
		}
	})
	assert.Zero(t, allocs, "allocations per batch of 8 receives, 8 sends and their completions")
}

func countFds(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(ents)
}

func TestDeviceBindCloseLeaksNoFd(t *testing.T) {
	d := needDevice(t)
	cycle := func(withQP bool) {
		id, err := d.p.Bind(verbs.BindConfig{Addr: d.addr})
		require.NoError(t, err)
		if withQP {
			_, err = id.CreateQP(verbs.QPConfig{SendDepth: 16, RecvDepth: 16})
			require.NoError(t, err)
		}
		require.NoError(t, id.Close())
	}
	cycle(true) // librdmacm and libibverbs open their devices once
	before := countFds(t)
	for i := 0; i < 100; i++ {
		cycle(i%2 == 0)
	}
	assert.Equal(t, before, countFds(t), "fds after 100 Bind/Close cycles")
}
