//go:build linux

package rdmanet_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/testenv"
	"github.com/go-rdma/rdmanet/ipoib"
	"github.com/go-rdma/rdmanet/rdmanet"
)

// backendInfo returns the named backend of Backends(), failing if absent.
func backendInfo(t *testing.T, bs []rdmanet.BackendInfo, name string) rdmanet.BackendInfo {
	t.Helper()
	for _, b := range bs {
		if b.Name == name {
			return b
		}
	}
	t.Fatalf("backend %q not among %+v", name, bs)
	return rdmanet.BackendInfo{}
}

func findDevice(devs []rdmanet.Device, name string) *rdmanet.Device {
	for i := range devs {
		if devs[i].Name == name {
			return &devs[i]
		}
	}
	return nil
}

// swLoMaxQPWR returns the software backend's lo device's MaxQPWR (0: no
// sw-lo).
func swLoMaxQPWR(t *testing.T) int {
	t.Helper()
	devs, err := rdmanet.Devices()
	require.NoError(t, err)
	if lo := findDevice(devs, "sw-lo"); lo != nil {
		return lo.MaxQPWR
	}
	return 0
}

// Backends lists the backends in name order; the software one runs
// anywhere and sees lo as sw-lo, with 127.0.0.1's RoCE v2 GID; in the rxe
// VM rdma-core runs and sees the test device, with its address's GID. A
// backend that does not run says why, wrapping ErrUnavailable.
func TestBackends(t *testing.T) {
	bs := rdmanet.Backends()
	var names []string
	for _, b := range bs {
		names = append(names, b.Name)
	}
	// The tests register test backends (test-*) besides the two.
	assert.IsNonDecreasing(t, names, "name order")
	assert.Subset(t, names, []string{rdmanet.BackendRDMACore, rdmanet.BackendSoftware})

	sw := backendInfo(t, bs, rdmanet.BackendSoftware)
	require.NoError(t, sw.Unavailable)
	require.NoError(t, sw.DevicesErr)
	lo := findDevice(sw.Devices, "sw-lo")
	require.NotNil(t, lo, "no sw-lo in %+v", sw.Devices)
	assert.Equal(t, rdmanet.BackendSoftware, lo.Backend)
	assert.Positive(t, lo.MaxMcastGroups)
	require.Len(t, lo.Ports, 1)
	p := lo.Ports[0]
	assert.Equal(t, 1, p.Port)
	assert.Equal(t, "lo", p.Netdev)
	assert.Equal(t, ipoib.LinkLayerEthernet, p.LinkLayer)
	assert.Equal(t, 4096, p.ActiveMTU, "RoCE MTU of lo's 65536")
	assert.Contains(t, p.GIDs, ipoib.GIDEntry{Index: p.GIDs[0].Index, GID: ipoib.GIDFromIP(netip.MustParseAddr("127.0.0.1")),
		Type: ipoib.GIDTypeRoCEv2, Netdev: "lo"})

	rc := backendInfo(t, bs, rdmanet.BackendRDMACore)
	if testDevice == "" {
		if rc.Unavailable != nil {
			assert.ErrorIs(t, rc.Unavailable, rdmanet.ErrUnavailable)
			assert.Empty(t, rc.Devices)
		}
		return
	}
	require.NoError(t, rc.Unavailable, "%s=%s but rdma-core is unavailable", testenv.EnvDevice, testDevice)
	require.NoError(t, rc.DevicesErr)
	d := findDevice(rc.Devices, testDevice)
	require.NotNil(t, d, "%s=%s not among %+v", testenv.EnvDevice, testDevice, rc.Devices)
	assert.Equal(t, rdmanet.BackendRDMACore, d.Backend)
	assert.Positive(t, d.MaxMcastGroups)
	require.NotEmpty(t, d.Ports)
	assert.Equal(t, ipoib.PortActive, d.Ports[0].State)
	assert.Positive(t, d.Ports[0].ActiveMTU)
	want := ipoib.GIDFromIP(netip.MustParseAddr(testAddr))
	found := false
	for _, e := range d.Ports[0].GIDs {
		found = found || e.GID == want
	}
	assert.True(t, found, "no GID %s in %+v", want, d.Ports[0].GIDs)
}

// Devices is every available backend's devices, in Backends' order, and
// a device it returns is one ListenConfig.Device can name.
func TestDevices(t *testing.T) {
	devs, err := rdmanet.Devices()
	require.NoError(t, err)
	// Names, not whole devices: another test may add a netdev between
	// the two calls.
	var want, got []string
	for _, b := range rdmanet.Backends() {
		for _, d := range b.Devices {
			want = append(want, b.Name+"/"+d.Name)
		}
	}
	for _, d := range devs {
		got = append(got, d.Backend+"/"+d.Name)
	}
	assert.Equal(t, want, got)

	name := "sw-lo"
	if testDevice != "" {
		name = testDevice
	}
	d := findDevice(devs, name)
	require.NotNil(t, d, "no %s in %+v", name, devs)
	lc := testConfig()
	lc.Backend = d.Backend
	lc.Device = d.Name
	c, err := lc.ListenMulticast(context.Background(), "rdma", nil, newGroup())
	require.NoError(t, err)
	defer c.Close()
	assert.Equal(t, d.Name, c.Backend().Device)
	assert.Equal(t, d.Backend, c.Backend().Name)
}

// A backend the build lacks is an error naming what to do, and the
// availability error is the one ListenMulticast returns for it.
func TestUnavailableBackendListen(t *testing.T) {
	rc := backendInfo(t, rdmanet.Backends(), rdmanet.BackendRDMACore)
	if rc.Unavailable == nil {
		t.Skip("rdma-core is available here")
	}
	lc := rdmanet.ListenConfig{Backend: rdmanet.BackendRDMACore}
	_, err := lc.ListenMulticast(context.Background(), "rdma", nil, &net.UDPAddr{IP: net.IPv4(239, 77, 0, 1)})
	require.Error(t, err)
	assert.True(t, errors.Is(err, rdmanet.ErrUnavailable), "got %v, want it to wrap ErrUnavailable", err)
}
