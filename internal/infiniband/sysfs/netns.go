package sysfs

import (
	"net"
	"path/filepath"
	"sort"
	"strings"

	"github.com/go-rdma/rdmanet/internal/infiniband"
)

// liveInterfaces lists the network interfaces of the process's network
// namespace (rtnetlink on Linux). Tests replace it.
var liveInterfaces = net.Interfaces

// isLive reports whether root is the running system's, where sysfs and
// the process's network namespace can disagree.
func isLive(root string) bool { return filepath.Clean(root) == "/" }

// inNamespace keeps the netdevs that belong to the process's network
// namespace, as ifis lists them. sysfs shows the namespace of whoever
// mounted it: after a plain `unshare -n` /sys/class/net is still the
// host's, so it lists the host's eth0 and lacks the namespace's own
// interfaces. A sysfs entry is kept when an interface of the namespace
// has its name, index and hardware address (addrs: each sysfs entry's
// address file); its MTU is then the namespace's. An interface sysfs
// does not show, or shows as another namespace's device of the same
// name, is described from ifis alone: kind by its flags and address
// length, operstate up or down by its flags.
// unseen names the netdevs kept that sysfs does not describe.
func inNamespace(netdevs []Netdev, addrs map[string]string, ifis []net.Interface) (kept []Netdev, unseen map[string]bool) {
	byName := make(map[string]Netdev, len(netdevs))
	for _, n := range netdevs {
		byName[n.Name] = n
	}
	out := make([]Netdev, 0, len(ifis))
	unseen = map[string]bool{}
	for _, ifi := range ifis {
		if n, ok := byName[ifi.Name]; ok && n.Index == ifi.Index && sameHardware(addrs[ifi.Name], ifi.HardwareAddr) {
			n.MTU = ifi.MTU
			out = append(out, n)
			continue
		}
		out = append(out, netdevFromInterface(ifi))
		unseen[ifi.Name] = true
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, unseen
}

// sysfsAddrs reads the address file of each netdev under dir.
func sysfsAddrs(dir string, netdevs []Netdev) map[string]string {
	addrs := make(map[string]string, len(netdevs))
	for _, n := range netdevs {
		addrs[n.Name], _ = readTrim(filepath.Join(dir, n.Name, "address"))
	}
	return addrs
}

// netdevFromInterface describes an interface from what the interface
// list says of it.
func netdevFromInterface(ifi net.Interface) Netdev {
	n := Netdev{Name: ifi.Name, Index: ifi.Index, MTU: ifi.MTU, OperState: "down"}
	switch {
	case ifi.Flags&net.FlagLoopback != 0:
		n.Kind, n.ARPHRD = infiniband.NetdevLoopback, arphrdLoopback
	case len(ifi.HardwareAddr) == infiniband.LinkAddrLen:
		n.Kind, n.ARPHRD = infiniband.NetdevIPoIB, arphrdInfiniBand
		n.LinkAddr, _ = infiniband.LinkAddrFromHardware(ifi.HardwareAddr)
	case len(ifi.HardwareAddr) == 6:
		n.Kind, n.ARPHRD = infiniband.NetdevEthernet, arphrdEther
	}
	switch {
	case ifi.Flags&net.FlagRunning != 0 && n.Kind == infiniband.NetdevLoopback:
		n.OperState = "unknown" // as the kernel reports lo
	case ifi.Flags&net.FlagRunning != 0:
		n.OperState = "up"
	}
	return n
}

// sameHardware reports whether a sysfs address file's text names hw. An
// all-zero address (lo's) is no address, as net.Interface has it.
func sameHardware(sysfs string, hw net.HardwareAddr) bool {
	if strings.Trim(sysfs, "0:") == "" {
		return len(hw) == 0 || strings.Trim(hw.String(), "0:") == ""
	}
	return strings.EqualFold(sysfs, hw.String())
}
