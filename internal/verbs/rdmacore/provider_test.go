//go:build linux

package rdmacore_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/verbs"
	_ "github.com/go-rdma/rdmanet/internal/verbs/rdmacore"
)

func rdmaCore(t *testing.T) verbs.Provider {
	t.Helper()
	p, err := verbs.Lookup(verbs.RDMACore)
	require.NoError(t, err, "package rdmacore must register itself")
	require.Equal(t, verbs.RDMACore, p.Name())
	return p
}

// hasDevices reports whether the kernel lists any RDMA device.
func hasDevices() bool {
	ents, err := os.ReadDir("/sys/class/infiniband")
	return err == nil && len(ents) > 0
}

// TestAvailableSaysWhy: without a device (or without rdma-core, or
// without cgo) Available explains itself and wraps ErrUnavailable.
func TestAvailableSaysWhy(t *testing.T) {
	p := rdmaCore(t)
	err := p.Available()
	if hasDevices() {
		if err != nil && !strings.Contains(err.Error(), "without cgo") {
			t.Fatalf("Available with devices present: %v", err)
		}
		return
	}
	require.Error(t, err, "Available with no RDMA device")
	assert.True(t, errors.Is(err, verbs.ErrUnavailable), "got %v, want it to wrap ErrUnavailable", err)
	msg := err.Error()
	ok := strings.Contains(msg, "no RDMA device") || strings.Contains(msg, "install rdma-core") ||
		strings.Contains(msg, "built without cgo")
	assert.True(t, ok, "message %q says neither what is missing nor how to fix it", msg)
	assert.False(t, p.Serves(verbs.BindConfig{}), "Serves with nothing available")
}

// TestBindLoopbackNoDevice: no config means loopback, which no RDMA
// device serves (and never the default route's interface).
func TestBindLoopbackNoDevice(t *testing.T) {
	p := rdmaCore(t)
	id, err := p.Bind(verbs.BindConfig{})
	if err == nil {
		id.Close()
		t.Fatalf("Bind to loopback succeeded on %+v, want ErrNoDevice", id.Local())
	}
	if strings.Contains(err.Error(), "without cgo") || strings.Contains(err.Error(), "install rdma-core") {
		assert.True(t, errors.Is(err, verbs.ErrUnavailable), "got %v", err)
		return
	}
	assert.True(t, errors.Is(err, verbs.ErrNoDevice), "got %v, want it to wrap ErrNoDevice", err)
	assert.False(t, p.Serves(verbs.BindConfig{}), "Serves(loopback)")
}

func TestDevicesWithoutDevice(t *testing.T) {
	if hasDevices() {
		t.Skip("this machine has RDMA devices: see the device tests")
	}
	p := rdmaCore(t)
	devs, err := p.Devices()
	if err != nil {
		assert.True(t, errors.Is(err, verbs.ErrUnavailable), "got %v", err)
		return
	}
	assert.Empty(t, devs)
}
