package rdmanet

import (
	"errors"
	"fmt"
	"slices"

	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/ipoib"
)

// ErrUnavailable is wrapped by the error that says why a backend cannot
// run on this machine (rdma-core not installed, a build with
// CGO_ENABLED=0, no RDMA device): BackendInfo.Unavailable, and
// ListenMulticast with that backend named.
var ErrUnavailable = verbs.ErrUnavailable

// BackendInfo is one backend as Backends reports it: whether it can run
// here and the devices it sees.
type BackendInfo struct {
	Name string // BackendSoftware or BackendRDMACore
	// Unavailable is nil when the backend can run on this machine, else
	// an error (wrapping ErrUnavailable) that says why and how to fix it.
	Unavailable error
	// Devices are the devices the backend sees: the RDMA devices
	// (rdma-core), or one sw-NETDEV per network interface that is not
	// IPoIB (software). Empty when the backend is unavailable.
	Devices []Device
	// DevicesErr is why the devices could not be listed, if they could
	// not (the backend being available).
	DevicesErr error
}

// Device is an RDMA device as a backend sees it: ListenConfig.Device
// names one.
type Device struct {
	Name     string
	Backend  string // BackendSoftware or BackendRDMACore
	NodeGUID uint64
	// MaxMcastGroups is the device's max_mcast_grp: how many groups it
	// can join in all; 0 means it cannot do multicast at all.
	MaxMcastGroups int
	// MaxQPMcastAttach is max_mcast_qp_attach: how many QPs may attach
	// to one group.
	MaxQPMcastAttach int
	// MaxQPWR is the deepest work queue a QP may have (max_qp_wr).
	MaxQPWR int
	Ports   []Port
}

// Port is one port of a Device.
type Port struct {
	Port      int // from 1, as ListenConfig.Port
	State     ipoib.PortState
	ActiveMTU int // bytes: the largest UD payload; 0 when unknown
	MaxMTU    int // bytes
	LinkLayer ipoib.LinkLayer
	// Netdev is the network interface under the port ("" when none is
	// known).
	Netdev string
	GIDs   []ipoib.GIDEntry
}

// Backends reports every backend this build has, in name order
// ("rdma-core", "software"): whether it can run here and, if it can, the
// devices it sees. Like net.Interfaces it reads the machine's state each
// time it is called. What the kernel's sysfs shows of the same devices
// (node types, P_Keys, netdevs and their IPoIB addresses) is
// ipoib.Discover's.
func Backends() []BackendInfo {
	var out []BackendInfo
	for _, p := range verbs.Providers() {
		b := BackendInfo{Name: p.Name()}
		if err := p.Available(); err != nil {
			b.Unavailable = err
			out = append(out, b)
			continue
		}
		devs, err := p.Devices()
		b.DevicesErr = err
		for _, d := range devs {
			b.Devices = append(b.Devices, publicDevice(p.Name(), d))
		}
		out = append(out, b)
	}
	return out
}

// Devices returns the devices of every backend that can run here, in
// backend and then device order: the RDMA devices rdma-core sees and the
// software backend's sw-NETDEV devices. The error joins what kept a
// backend that is available from listing its devices; the devices of the
// others are returned with it.
func Devices() ([]Device, error) {
	var devs []Device
	var errs []error
	for _, b := range Backends() {
		if b.Unavailable != nil {
			continue
		}
		devs = append(devs, b.Devices...)
		if b.DevicesErr != nil {
			errs = append(errs, fmt.Errorf("rdmanet: %s: listing devices: %w", b.Name, b.DevicesErr))
		}
	}
	return devs, errors.Join(errs...)
}

func publicDevice(backend string, d verbs.DeviceAttr) Device {
	out := Device{
		Name:             d.Name,
		Backend:          backend,
		NodeGUID:         d.NodeGUID,
		MaxMcastGroups:   d.MaxMcastGroups,
		MaxQPMcastAttach: d.MaxQPMcastAttach,
		MaxQPWR:          d.MaxQPWR,
	}
	for _, p := range d.Ports {
		out.Ports = append(out.Ports, Port{
			Port:      p.Port,
			State:     p.State,
			ActiveMTU: p.ActiveMTU,
			MaxMTU:    p.MaxMTU,
			LinkLayer: p.LinkLayer,
			Netdev:    p.Netdev,
			GIDs:      slices.Clone(p.GIDs),
		})
	}
	return out
}
