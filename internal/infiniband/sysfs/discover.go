package sysfs

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/go-rdma/rdmanet/internal/infiniband"
)

// System is what Discover found: the RDMA devices and the network
// interfaces, sorted by name.
type System struct {
	Root    string
	Devices []Device
	Netdevs []Netdev
	// InterfaceAddrs returns the IP addresses of a network interface;
	// PortForIP uses it for IPoIB interfaces. Discover sets it to a
	// function that asks the kernel (net.InterfaceByName); tests may
	// replace it.
	InterfaceAddrs func(netdev string) ([]netip.Addr, error)
	// unseen names the netdevs of the process's network namespace that
	// the sysfs under Root does not describe (see inNamespace): their
	// sysfs directories, if any, are another namespace's.
	unseen map[string]bool
}

// Discover reads the RDMA devices and network interfaces from the sysfs
// under root ("/" for the running system; a directory holding a fake
// sys/class tree for tests). A missing /sys/class/infiniband means no RDMA
// devices, not an error.
//
// On the running system the network interfaces are those of the
// process's network namespace (net.Interfaces), whatever namespace the
// mounted sysfs shows; RDMA devices are listed as sysfs has them.
func Discover(root string) (*System, error) {
	if root == "" {
		root = "/"
	}
	s := &System{Root: root, InterfaceAddrs: kernelAddrs}
	var err error
	netDir := filepath.Join(root, "sys/class/net")
	if s.Netdevs, err = readNetdevs(netDir); err != nil {
		return nil, err
	}
	if isLive(root) {
		ifis, err := liveInterfaces()
		if err != nil {
			return nil, fmt.Errorf("ipoib: network interfaces: %w", err)
		}
		s.Netdevs, s.unseen = inNamespace(s.Netdevs, sysfsAddrs(netDir, s.Netdevs), ifis)
	}
	if s.Devices, err = readDevices(filepath.Join(root, "sys/class/infiniband")); err != nil {
		return nil, err
	}
	s.link()
	return s, nil
}

// Device returns the named RDMA device, or nil.
func (s *System) Device(name string) *Device {
	for i := range s.Devices {
		if s.Devices[i].Name == name {
			return &s.Devices[i]
		}
	}
	return nil
}

// Netdev returns the named network interface, or nil.
func (s *System) Netdev(name string) *Netdev {
	for i := range s.Netdevs {
		if s.Netdevs[i].Name == name {
			return &s.Netdevs[i]
		}
	}
	return nil
}

// Port returns a port of a device, or nil.
func (s *System) Port(device string, port int) *Port {
	d := s.Device(device)
	if d == nil {
		return nil
	}
	for i := range d.Ports {
		if d.Ports[i].Port == port {
			return &d.Ports[i]
		}
	}
	return nil
}

// link fills the cross references: netdev -> device/port (from the GID
// tables, else the netdev's device/infiniband directory and dev_port), port
// -> netdevs, and the derived port MTU.
func (s *System) link() {
	for di := range s.Devices {
		d := &s.Devices[di]
		for pi := range d.Ports {
			p := &d.Ports[pi]
			for _, e := range p.GIDs {
				if n := s.Netdev(e.Netdev); n != nil && n.Device == "" {
					n.Device, n.Port = d.Name, p.Port
				}
			}
		}
	}
	for ni := range s.Netdevs {
		n := &s.Netdevs[ni]
		if n.Device != "" || s.unseen[n.Name] {
			continue
		}
		dev, port := n.fallbackDevice(s.Root)
		if dev == "" && n.Parent != "" {
			if parent := s.Netdev(n.Parent); parent != nil {
				dev, port = parent.fallbackDevice(s.Root)
			}
		}
		if s.Port(dev, port) != nil {
			n.Device, n.Port = dev, port
		}
	}
	for _, n := range s.Netdevs {
		if p := s.Port(n.Device, n.Port); p != nil {
			p.Netdevs = append(p.Netdevs, n.Name)
		}
	}
	for di := range s.Devices {
		for pi := range s.Devices[di].Ports {
			s.derivePortMTU(&s.Devices[di].Ports[pi])
		}
	}
}

func (n *Netdev) fallbackDevice(root string) (string, int) {
	dir := filepath.Join(root, "sys/class/net", n.Name)
	ents, err := os.ReadDir(filepath.Join(dir, "device", "infiniband"))
	if err != nil || len(ents) == 0 {
		return "", 0
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	// dev_port (decimal) is the 0-based port; older kernels used dev_id
	// (hex) for it.
	port := 1
	if v, ok := readTrim(filepath.Join(dir, "dev_port")); ok {
		if i, err := strconv.Atoi(v); err == nil {
			port = i + 1
		}
	}
	if port == 1 {
		if v, ok := readTrim(filepath.Join(dir, "dev_id")); ok {
			if i, err := strconv.ParseInt(v, 0, 32); err == nil {
				port = int(i) + 1
			}
		}
	}
	return names[0], port
}

func (s *System) derivePortMTU(p *Port) {
	switch p.LinkLayer {
	case infiniband.LinkLayerEthernet:
		var names []string
		for _, e := range p.GIDs {
			if e.Netdev != "" {
				names = append(names, e.Netdev)
			}
		}
		names = append(names, p.Netdevs...)
		for _, name := range names {
			if n := s.Netdev(name); n != nil && n.MTU > 0 {
				p.ActiveMTU, p.MTUFrom = infiniband.RoCEMTU(n.MTU), name
				return
			}
		}
	case infiniband.LinkLayerInfiniBand:
		for _, name := range p.Netdevs {
			if n := s.Netdev(name); n != nil && n.Kind == infiniband.NetdevIPoIB && n.Mode == "datagram" && n.MTU > 0 {
				p.ActiveMTU, p.MTUFrom = infiniband.FloorIBMTU(n.MTU+4), name
				return
			}
		}
	}
}
