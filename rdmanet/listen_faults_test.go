//go:build linux

package rdmanet_test

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/rdmanet"
)

// errFault is what the verbs of a FaultBackend fail with.
var errFault = errors.New("test: injected fault")

// faults registers a FaultBackend of t's own and returns its name.
func faults(t testing.TB, f *rdmanet.Faults) string {
	return rdmanet.FaultBackend("test-faults-"+t.Name(), f)
}

// failNth returns a hook that fails its nth call (from 1) with errFault.
func failNth(n int32) func() error {
	var calls atomic.Int32
	return func() error {
		if calls.Add(1) == n {
			return errFault
		}
		return nil
	}
}

// listenFails listens on backend and returns the error, closing a conn
// that it wrongly made. The error is a *net.OpError whose Addr is the
// group, or none for a nil group.
func listenFails(t *testing.T, lc rdmanet.ListenConfig, group *net.UDPAddr) error {
	t.Helper()
	c, err := lc.ListenMulticast(t.Context(), "rdma", nil, group)
	if c != nil {
		c.Close()
	}
	require.Error(t, err)
	var oe *net.OpError
	require.ErrorAs(t, err, &oe)
	require.Equal(t, "listen", oe.Op)
	var want net.Addr // the group, or none at all (not a nil *net.UDPAddr)
	if group != nil {
		want = group
	}
	require.Equal(t, want, oe.Addr, "the error's Addr")
	require.NotContains(t, err.Error(), "<nil>")
	return err
}

// Every step of a listen that fails fails the listen with its error: the
// rings' memory registrations, the first post of the receive ring, the
// event waiter, the group's join.
func TestListenFailsWhereItsVerbsFail(t *testing.T) {
	softOnly(t)
	t.Parallel()
	for _, tc := range []struct {
		name string
		f    rdmanet.Faults
	}{
		{"receive ring's MR", rdmanet.Faults{RegisterMemory: failNth(1)}},
		{"send ring's MR", rdmanet.Faults{RegisterMemory: failNth(2)}},
		{"receive ring's post", rdmanet.Faults{PostRecv: failNth(1)}},
		{"event waiter", rdmanet.Faults{EventWaiter: failNth(1)}},
		{"join", rdmanet.Faults{Join: func(verbs.Group) error { return errFault }}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := tc.f
			lc := rdmanet.ListenConfig{Backend: faults(t, &f)}
			require.ErrorIs(t, listenFails(t, lc, newGroup()), errFault)
			// The same backend listens once the fault is used up.
			if tc.name != "join" {
				c := listen(t, newGroup(), func(l *rdmanet.ListenConfig) { *l = lc })
				require.NoError(t, c.Close())
			}
		})
	}
}

// A listen whose MTU makes a ring's memory over 1 GiB fails, naming the
// ring: the MTU is known only once the QP exists.
func TestListenRefusesRingOverLimitAtItsMTU(t *testing.T) {
	softOnly(t)
	t.Parallel()
	f := rdmanet.Faults{Local: func(b verbs.Binding) verbs.Binding { b.MTU = 1 << 20; return b }}
	lc := rdmanet.ListenConfig{Backend: faults(t, &f), RecvDepth: 1100}
	err := listenFails(t, lc, nil)
	require.ErrorContains(t, err, "rdmanet: ListenConfig.RecvDepth 1100 takes ")
	require.ErrorContains(t, err, "at MTU 1048576, over the limit of 1073741824 bytes (1 GiB) a ring")
}

// A CreateQP that fails with a depth over the device's max_qp_wr is
// explained by the depth's field, and the error still wraps CreateQP's;
// so is a MaxInline above the default refused with EINVAL, and only
// above it.
func TestCreateQPFailureExplained(t *testing.T) {
	softOnly(t)
	t.Parallel()
	var fail atomic.Pointer[error] // the error CreateQP fails with
	f := rdmanet.Faults{CreateQP: func() error { return *fail.Load() }}
	backend := faults(t, &f)

	fail.Store(&errFault)
	err := listenFails(t, rdmanet.ListenConfig{Backend: backend, RecvDepth: 1 << 20}, nil)
	require.ErrorContains(t, err, "rdmanet: ListenConfig.RecvDepth 1048576 is over the device's limit ")
	require.ErrorIs(t, err, errFault)
	err = listenFails(t, rdmanet.ListenConfig{Backend: backend, SendDepth: 1 << 20}, nil)
	require.ErrorContains(t, err, "rdmanet: ListenConfig.SendDepth 1048576 is over the device's limit ")
	require.ErrorIs(t, err, errFault)

	var einval error = &net.OpError{Op: "create_qp", Err: syscall.EINVAL}
	fail.Store(&einval)
	err = listenFails(t, rdmanet.ListenConfig{Backend: backend, MaxInline: 512}, nil)
	require.ErrorContains(t, err, "rdmanet: ListenConfig.MaxInline 512 is more than sw-lo takes for inline sends (the default is 256): ")
	require.ErrorIs(t, err, syscall.EINVAL)
	for _, inline := range []int{0, 256} {
		err = listenFails(t, rdmanet.ListenConfig{Backend: backend, MaxInline: inline}, nil)
		require.NotContains(t, err.Error(), "MaxInline", "MaxInline %d", inline)
		require.ErrorIs(t, err, syscall.EINVAL)
	}
	// Another error with a large MaxInline is CreateQP's as it is.
	fail.Store(&errFault)
	err = listenFails(t, rdmanet.ListenConfig{Backend: backend, MaxInline: 512}, nil)
	require.NotContains(t, err.Error(), "MaxInline")
	require.ErrorIs(t, err, errFault)
}

// A depth at the device's max_qp_wr is within its limit: a CreateQP
// that fails with RecvDepth or SendDepth exactly at it is not blamed on
// the depth, and its error is CreateQP's as it is.
func TestCreateQPFailureAtTheLimitNotExplained(t *testing.T) {
	softOnly(t)
	t.Parallel()
	backend := faults(t, &rdmanet.Faults{CreateQP: func() error { return errFault }})
	limit := swLoMaxQPWR(t)
	require.Positive(t, limit, "sw-lo's MaxQPWR")
	for _, lc := range []rdmanet.ListenConfig{
		{Backend: backend, RecvDepth: limit},
		{Backend: backend, SendDepth: limit},
		{Backend: backend, RecvDepth: limit, SendDepth: limit},
	} {
		err := listenFails(t, lc, nil)
		require.ErrorIs(t, err, errFault, "RecvDepth %d, SendDepth %d", lc.RecvDepth, lc.SendDepth)
		require.NotContains(t, err.Error(), "over the device's limit", "RecvDepth %d, SendDepth %d", lc.RecvDepth, lc.SendDepth)
	}
	// One over is named, so the limit read above is the one checked.
	err := listenFails(t, rdmanet.ListenConfig{Backend: backend, SendDepth: limit + 1}, nil)
	require.ErrorContains(t, err, fmt.Sprintf("rdmanet: ListenConfig.SendDepth %d is over the device's limit %d (max_qp_wr of sw-lo)", limit+1, limit))
}

// A device whose max_qp_wr is 1 has a limit (only 0 is unknown): a
// CreateQP that fails with a depth over it is explained by the depth.
// (Not parallel: rdmanet.Devices lists the backend's devices while it
// is registered.)
func TestCreateQPFailureExplainedAtTheLeastLimit(t *testing.T) {
	softOnly(t)
	name := "test-faults-" + t.Name()
	t.Cleanup(func() { rdmanet.FaultBackend(name, &rdmanet.Faults{}) })
	rdmanet.FaultBackend(name, &rdmanet.Faults{
		DeviceAttrs: func(devs []verbs.DeviceAttr) {
			for i := range devs {
				devs[i].MaxQPWR = 1
			}
		},
		CreateQP: func() error { return errFault },
	})
	err := listenFails(t, rdmanet.ListenConfig{Backend: name, RecvDepth: 2}, nil)
	require.ErrorIs(t, err, errFault)
	require.ErrorContains(t, err, "rdmanet: ListenConfig.RecvDepth 2 is over the device's limit 1 (max_qp_wr of sw-lo)")
}

// Where the devices cannot be listed, a failed CreateQP is returned as
// it is. (Not parallel: the backend's failing Devices is seen by every
// call of rdmanet.Devices while it is registered.)
func TestCreateQPFailureUnexplainedWithoutDevices(t *testing.T) {
	softOnly(t)
	name := "test-faults-" + t.Name()
	t.Cleanup(func() { rdmanet.FaultBackend(name, &rdmanet.Faults{}) })
	f := rdmanet.Faults{
		Devices:  func() error { return errFault },
		CreateQP: func() error { return errFault },
	}
	rdmanet.FaultBackend(name, &f)
	err := listenFails(t, rdmanet.ListenConfig{Backend: name, RecvDepth: 1 << 20}, nil)
	require.ErrorIs(t, err, errFault)
	require.NotContains(t, err.Error(), "over the device's limit")
}

// rdmanet.Devices returns the devices of the backends that list them,
// and an error that names each backend that cannot. (Not parallel, as
// above.)
func TestDevicesNamesBackendThatCannotList(t *testing.T) {
	softOnly(t)
	name := "test-faults-" + t.Name()
	t.Cleanup(func() { rdmanet.FaultBackend(name, &rdmanet.Faults{}) })
	want, err := rdmanet.Devices()
	require.NoError(t, err)
	rdmanet.FaultBackend(name, &rdmanet.Faults{Devices: func() error { return errFault }})
	devs, err := rdmanet.Devices()
	require.ErrorIs(t, err, errFault)
	require.EqualError(t, err, "rdmanet: "+name+": listing devices: "+errFault.Error())
	// The others' are all there: this one listed the software devices.
	var others []rdmanet.Device
	for _, d := range want {
		if d.Backend != name {
			others = append(others, d)
		}
	}
	require.Equal(t, others, devs)
}

// The auto backend takes rdma-core where rdma-core serves the address,
// and otherwise says in a failed listen that it had no port for it.
// (Not parallel: it stands a software-backed provider in for rdma-core
// for every conn.)
func TestAutoTakesRDMACoreWhereItServes(t *testing.T) {
	softOnly(t)
	orig, err := verbs.Lookup(rdmanet.BackendRDMACore)
	if err != nil {
		t.Skip("rdma-core is not built in")
	}
	t.Cleanup(func() { verbs.Register(orig) })
	var serves atomic.Bool
	verbs.Register(rdmanet.StandInRDMACore(&serves))

	serves.Store(true)
	c, err := (&rdmanet.ListenConfig{Backend: rdmanet.BackendAuto}).ListenMulticast(t.Context(), "rdma", nil, newGroup())
	require.NoError(t, err)
	require.Equal(t, rdmanet.BackendRDMACore, c.Backend().Name)
	require.NoError(t, c.Close())

	serves.Store(false)
	c, err = (&rdmanet.ListenConfig{Backend: rdmanet.BackendAuto}).ListenMulticast(t.Context(), "rdma", nil, newGroup())
	require.NoError(t, err)
	require.Equal(t, rdmanet.BackendSoftware, c.Backend().Name)
	require.NoError(t, c.Close())
	// The reason shows where the software backend fails too: here on a
	// device it does not have.
	lc := rdmanet.ListenConfig{Backend: rdmanet.BackendAuto, Device: "mlx5_nonesuch"}
	err = listenFails(t, lc, nil)
	require.ErrorContains(t, err, "rdmanet: backend auto fell back to the software backend (rdma-core has no active port that serves device \"mlx5_nonesuch\"), which failed: ")
	require.ErrorIs(t, err, verbs.ErrNoDevice, "the software backend's error, wrapped")
	require.False(t, strings.Contains(err.Error(), "unavailable"))
}
