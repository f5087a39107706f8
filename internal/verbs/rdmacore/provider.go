//go:build linux && cgo

package rdmacore

/*
#include "shim.h"
*/
import "C"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/infiniband"
	"github.com/go-rdma/rdmanet/internal/infiniband/sysfs"
	"github.com/go-rdma/rdmanet/internal/verbs"
)

func init() { verbs.Register(provider{}) }

type provider struct{}

var _ verbs.Provider = provider{}

func (provider) Name() string { return verbs.RDMACore }

// Available loads rdma-core (once) and lists the devices (every time: an
// rxe device may be added later).
func (provider) Available() error {
	if err := load(); err != nil {
		return err
	}
	names, err := deviceNames()
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return verbs.NoDevicef("rdmacore: no RDMA device (ibv_get_device_list found none; for Soft-RoCE: "+
			"modprobe rdma_rxe && rdma link add rxe0 type rxe netdev <ifname>): %w",
			verbs.ErrUnavailable)
	}
	return nil
}

// deviceList is ibv_get_device_list: a kernel without RDMA support
// (ENOSYS) or without the uverbs class counts as no device (nil list, nil
// error). Free a non-nil list with rn_free_device_list.
func deviceList() (*unsafe.Pointer, int, error) {
	var n, e C.int
	var list *unsafe.Pointer
	onControlThread(func() { list = C.rn_get_device_list(&n, &e) })
	if list == nil {
		switch unix.Errno(e) {
		case unix.ENOSYS, unix.ENOENT, unix.ENODEV, unix.ENXIO:
			return nil, 0, nil
		}
		return nil, 0, fmt.Errorf("ibv_get_device_list: %w", unix.Errno(e))
	}
	return list, int(n), nil
}

// deviceNames lists the devices libibverbs sees.
func deviceNames() ([]string, error) {
	list, n, err := deviceList()
	if list == nil {
		return nil, err
	}
	defer C.rn_free_device_list(list)
	names := make([]string, 0, n)
	for i := 0; i < n; i++ {
		names = append(names, C.GoString(C.rn_device_name(C.rn_device_at(list, C.int(i)))))
	}
	return names, nil
}

// Devices opens every device libibverbs lists and queries it and its
// ports; the GID tables, netdevs and RoCE path MTUs come from sysfs
// through sysfs.Discover.
func (provider) Devices() ([]verbs.DeviceAttr, error) {
	if err := load(); err != nil {
		return nil, err
	}
	list, n, err := deviceList()
	if list == nil {
		return nil, err
	}
	defer C.rn_free_device_list(list)
	// A sysfs that cannot be read (some containers) leaves the GID
	// tables empty; the verbs still answer.
	sys, _ := discover(sysfsRoot)
	var out []verbs.DeviceAttr
	for i := 0; i < n; i++ {
		dev := C.rn_device_at(list, C.int(i))
		name := C.GoString(C.rn_device_name(dev))
		var e C.int
		ctx := C.rn_open_device(dev, &e)
		if ctx == nil {
			return out, fmt.Errorf("ibv_open_device %s: %w", name, unix.Errno(e))
		}
		attr, err := queryDevice(ctx, name, sys)
		C.rn_close_device(ctx)
		if err != nil {
			return out, err
		}
		out = append(out, attr)
	}
	return out, nil
}

// queryDevice queries a device and its ports (ibv_query_device,
// ibv_query_port: max_mcast_grp and the IB active MTU are not in sysfs)
// and adds what sysfs shows (sys may be nil).
func queryDevice(ctx *C.struct_rn_ibv_context, name string, sys *sysfs.System) (verbs.DeviceAttr, error) {
	var da C.struct_rn_ibv_device_attr
	if e := C.rn_query_device(ctx, &da); e != 0 {
		return verbs.DeviceAttr{}, fmt.Errorf("ibv_query_device %s: %w", name, unix.Errno(e))
	}
	attr := verbs.DeviceAttr{
		Name:             name,
		Provider:         verbs.RDMACore,
		NodeGUID:         binary.BigEndian.Uint64((*[8]byte)(unsafe.Pointer(&da.node_guid))[:]),
		MaxMcastGroups:   int(da.max_mcast_grp),
		MaxQPMcastAttach: int(da.max_mcast_qp_attach),
		MaxQPWR:          int(da.max_qp_wr),
	}
	var sd *sysfs.Device
	if sys != nil {
		sd = sys.Device(name)
	}
	if sd != nil && !sd.Multicast {
		// A transport without UD multicast (iWARP, usNIC), whatever
		// the provider reports.
		attr.MaxMcastGroups = 0
	}
	for p := 1; p <= int(da.phys_port_cnt); p++ {
		pa, err := queryPort(ctx, name, p)
		if err != nil {
			return attr, err
		}
		if sys != nil {
			pa = refinePort(pa, sys.Port(name, p))
		}
		attr.Ports = append(attr.Ports, pa)
	}
	return attr, nil
}

// queryPort queries a port's state, MTUs and link layer.
func queryPort(ctx *C.struct_rn_ibv_context, name string, port int) (verbs.PortAttr, error) {
	var pa C.struct_rn_ibv_port_attr
	if e := C.rn_query_port(ctx, C.int(port), &pa); e != 0 {
		return verbs.PortAttr{}, fmt.Errorf("ibv_query_port %s port %d: %w", name, port, unix.Errno(e))
	}
	return verbs.PortAttr{
		Port:      port,
		State:     infiniband.PortState(pa.state),
		ActiveMTU: verbs.MTUBytes(int(pa.active_mtu)),
		MaxMTU:    verbs.MTUBytes(int(pa.max_mtu)),
		LinkLayer: linkLayer(pa.link_layer),
	}, nil
}

func linkLayer(ll C.uint8_t) infiniband.LinkLayer {
	switch ll {
	case C.RN_IBV_LINK_LAYER_INFINIBAND:
		return infiniband.LinkLayerInfiniBand
	case C.RN_IBV_LINK_LAYER_ETHERNET:
		return infiniband.LinkLayerEthernet
	}
	// IBV_LINK_LAYER_UNSPECIFIED: old providers; it means InfiniBand.
	return infiniband.LinkLayerInfiniBand
}

// Serves binds a temporary ID to cfg's address and reports whether that
// worked on an ACTIVE port.
func (p provider) Serves(cfg verbs.BindConfig) bool {
	if p.Available() != nil {
		return false
	}
	d, err := bind(cfg)
	if err != nil {
		return false
	}
	active := d.portState == infiniband.PortActive
	d.Close()
	return active
}

// Bind creates an rdma_cm ID in RDMA_PS_UDP and binds it to cfg's address.
func (provider) Bind(cfg verbs.BindConfig) (verbs.ID, error) {
	if err := load(); err != nil {
		return nil, err
	}
	return bind(cfg)
}

// noDevice reports whether errno means "no RDMA device here".
func noDevice(e unix.Errno) bool {
	switch e {
	case unix.ENOENT, unix.ENODEV, unix.ENXIO, unix.EADDRNOTAVAIL, unix.ENOSYS, unix.EAFNOSUPPORT:
		return true
	}
	return false
}

func bind(cfg verbs.BindConfig) (*id, error) {
	ip, zone, err := localAddr(cfg)
	if err != nil {
		return nil, err
	}
	// rdma_create_event_channel is the process's first rdma_cm call
	// (librdmacm lists the devices then) and rdma_bind_addr lists them
	// when the address is on a device it has not seen: control.go.
	var e C.int
	var ch *C.struct_rn_rdma_event_channel
	onControlThread(func() { ch = C.rn_create_event_channel(&e) })
	if ch == nil {
		err := fmt.Errorf("rdma_create_event_channel: %w", unix.Errno(e))
		if noDevice(unix.Errno(e)) {
			err = fmt.Errorf("%w (no /dev/infiniband/rdma_cm: no RDMA support; %w)", err, verbs.ErrNoDevice)
		}
		return nil, err
	}
	d := &id{ch: ch, chFd: int(ch.fd), epfd: -1, efd: -1, groups: map[verbs.GID]*group{}, pending: map[uint64]*joinResult{}}
	if err := unix.SetNonblock(d.chFd, true); err != nil {
		C.rn_destroy_event_channel(ch)
		return nil, fmt.Errorf("rdmacore: set cm event channel non-blocking: %w", err)
	}
	onControlThread(func() { e = C.rn_create_id(ch, &d.cm) })
	if e != 0 {
		C.rn_destroy_event_channel(ch)
		err := fmt.Errorf("rdma_create_id: %w", unix.Errno(e))
		if noDevice(unix.Errno(e)) {
			err = fmt.Errorf("%w (%w)", err, verbs.ErrNoDevice)
		}
		return nil, err
	}
	sa := sockaddrIP(ip, zone)
	onControlThread(func() { e = C.rn_bind_addr(d.cm, unsafe.Pointer(&sa.b[0])) })
	if e != 0 {
		d.destroyID()
		err := fmt.Errorf("rdma_bind_addr %s: %w", ip, unix.Errno(e))
		if noDevice(unix.Errno(e)) {
			err = verbs.NoDevicef("%w: no RDMA device serves %s (loopback never has one; bind to the address of an RDMA netdev, e.g. rxe's)",
				err, ip)
		}
		return nil, err
	}
	if d.cm.verbs == nil {
		d.destroyID()
		return nil, fmt.Errorf("rdma_bind_addr %s: bound to no device: %w", ip, verbs.ErrNoDevice)
	}
	if err := d.resolveBinding(ip); err != nil {
		d.destroyID()
		return nil, err
	}
	if cfg.Device != "" && cfg.Device != d.local.Device || cfg.Port != 0 && cfg.Port != d.local.Port {
		d.destroyID()
		return nil, verbs.NoDevicef("rdma_bind_addr %s: bound to %s port %d, want %s port %d (ListenConfig.Device and Port must agree with the address)",
			ip, d.local.Device, d.local.Port, cfg.Device, cfg.Port)
	}
	if d.dev, err = attachDev(d); err != nil {
		d.destroyID()
		return nil, err
	}
	if err := d.openEventSet(); err != nil {
		d.dev.detach(d)
		d.destroyID()
		return nil, err
	}
	return d, nil
}

// resolveBinding fills d.local from the bound id: device, port, GID and
// its index and type, link layer and MTU.
func (d *id) resolveBinding(ip net.IP) error {
	ctx := d.cm.verbs
	name := C.GoString(C.rn_device_name(ctx.device))
	port := int(d.cm.port_num)
	var da C.struct_rn_ibv_device_attr
	if e := C.rn_query_device(ctx, &da); e != 0 {
		return fmt.Errorf("ibv_query_device %s: %w", name, unix.Errno(e))
	}
	d.maxMcast = int(da.max_mcast_grp)
	d.maxMcastAttach, d.maxTotalAttach = int(da.max_mcast_qp_attach), int(da.max_total_mcast_qp_attach)
	pa, err := queryPort(ctx, name, port)
	if err != nil {
		return err
	}
	d.portState = pa.State
	var sgid verbs.GID
	copy(sgid[:], C.GoBytes(unsafe.Pointer(&d.cm.route.addr.addr[0]), 16))
	if sgid.IsZero() {
		sgid = infiniband.GIDFromNetIP(ip)
	}
	d.local = verbs.Binding{
		Device:    name,
		Port:      port,
		GID:       sgid,
		IP:        ip,
		LinkLayer: pa.LinkLayer,
		MTU:       pa.ActiveMTU,
	}
	bindingDetails(&d.local)
	return nil
}

var errNotJoined = errors.New("rdmacore: not a member of that group")
