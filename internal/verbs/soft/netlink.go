//go:build linux

package soft

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"slices"
	"syscall"
	"unsafe"

	"github.com/go-rdma/rdmanet/internal/infiniband"
)

// netlinkNetdev asks the kernel (rtnetlink RTM_GETLINK, as
// net.InterfaceByName does) for the kind, MTU and operational state of the
// netdev with index ifindex, in the calling thread's network namespace.
// sysfs is no substitute: /sys/class/net shows the namespace that mounted
// it, so in a namespace made with a plain `unshare -n` it shows the host's
// lo, and its MTU, not this namespace's.
func netlinkNetdev(ifindex int) (netdevInfo, error) {
	tab, err := syscall.NetlinkRIB(syscall.RTM_GETLINK, syscall.AF_UNSPEC)
	if err != nil {
		return netdevInfo{}, os.NewSyscallError("netlinkrib", err)
	}
	return parseNetdev(tab, ifindex)
}

// parseNetdev finds the netdev with index ifindex in tab, an RTM_GETLINK
// dump's answer.
func parseNetdev(tab []byte, ifindex int) (netdevInfo, error) {
	msgs, err := syscall.ParseNetlinkMessage(tab)
	if err != nil {
		return netdevInfo{}, os.NewSyscallError("parsenetlinkmessage", err)
	}
	for i := range msgs {
		m := &msgs[i]
		if m.Header.Type != syscall.RTM_NEWLINK || len(m.Data) < syscall.SizeofIfInfomsg {
			continue
		}
		ifim := (*syscall.IfInfomsg)(unsafe.Pointer(&m.Data[0]))
		if int(ifim.Index) != ifindex {
			continue
		}
		attrs, err := syscall.ParseNetlinkRouteAttr(m)
		if err != nil {
			return netdevInfo{}, os.NewSyscallError("parsenetlinkrouteattr", err)
		}
		n := netdevInfo{kind: kindOfARPHRD(ifim.Type), operState: "unknown"}
		for _, a := range attrs {
			switch a.Attr.Type {
			case syscall.IFLA_MTU:
				if len(a.Value) >= 4 {
					n.mtu = int(binary.NativeEndian.Uint32(a.Value))
				}
			case iflaOperState:
				if len(a.Value) >= 1 {
					n.operState = operStateName(a.Value[0])
				}
			}
		}
		return n, nil
	}
	return netdevInfo{}, fmt.Errorf("rtnetlink: no netdev with index %d", ifindex)
}

// iflaOperState is IFLA_OPERSTATE (syscall has no name for it).
const iflaOperState = 16

// operStateName is the name sysfs's operstate prints for an RFC 2863
// state (IF_OPER_*).
func operStateName(s uint8) string {
	switch s {
	case 1:
		return "notpresent"
	case 2:
		return "down"
	case 3:
		return "lowerlayerdown"
	case 4:
		return "testing"
	case 5:
		return "dormant"
	case 6:
		return "up"
	}
	return "unknown"
}

// kindOfARPHRD is the netdev kind of an ARPHRD_* link type.
func kindOfARPHRD(t uint16) infiniband.NetdevKind {
	switch t {
	case syscall.ARPHRD_ETHER:
		return infiniband.NetdevEthernet
	case syscall.ARPHRD_INFINIBAND:
		return infiniband.NetdevIPoIB
	case syscall.ARPHRD_LOOPBACK:
		return infiniband.NetdevLoopback
	}
	return infiniband.NetdevOther
}

// netlinkView is one look at the netdevs and addresses of the calling
// thread's network namespace, taken over a single rtnetlink socket (an
// RTM_GETLINK and an RTM_GETADDR dump): what resolve needs for a Bind,
// read once rather than once per question (net.InterfaceByName,
// netlinkNetdev and Interface.Addrs each open a socket and dump).
type netlinkView struct {
	links []netlinkLink
	addrs []netlinkAddr // in the order the kernel reports them
}

type netlinkLink struct {
	ifi  net.Interface
	info netdevInfo
}

type netlinkAddr struct {
	index int
	ip    net.IP
}

// readNetlinkView dumps the namespace's links and addresses.
func readNetlinkView() (*netlinkView, error) {
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, syscall.NETLINK_ROUTE)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return nil, os.NewSyscallError("bind", err)
	}
	return dumpNetlinkView(fd)
}

// dumpNetlinkView dumps the links and addresses on fd, a bound rtnetlink
// socket.
func dumpNetlinkView(fd int) (*netlinkView, error) {
	v := &netlinkView{}
	buf := make([]byte, 32<<10)
	err := netlinkDump(fd, buf, syscall.RTM_GETLINK, 1, func(m *syscall.NetlinkMessage) error {
		if m.Header.Type == syscall.RTM_NEWLINK {
			return v.addLink(m)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = netlinkDump(fd, buf, syscall.RTM_GETADDR, 2, func(m *syscall.NetlinkMessage) error {
		if m.Header.Type == syscall.RTM_NEWADDR {
			return v.addAddr(m)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return v, nil
}

// netlinkDump sends a dump request of type typ (AF_UNSPEC) on fd and
// hands each message of the answer to f, up to NLMSG_DONE.
func netlinkDump(fd int, buf []byte, typ uint16, seq uint32, f func(*syscall.NetlinkMessage) error) error {
	var req [syscall.NLMSG_HDRLEN + syscall.SizeofRtGenmsg]byte
	// struct nlmsghdr: len, type, flags, seq (the port id left 0).
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], typ)
	binary.NativeEndian.PutUint16(req[6:], syscall.NLM_F_DUMP|syscall.NLM_F_REQUEST)
	binary.NativeEndian.PutUint32(req[8:], seq)
	req[syscall.NLMSG_HDRLEN] = syscall.AF_UNSPEC
	if err := syscall.Sendto(fd, req[:], 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return os.NewSyscallError("sendto", err)
	}
	for {
		n, _, err := syscall.Recvfrom(fd, buf, 0)
		if err != nil {
			return os.NewSyscallError("recvfrom", err)
		}
		if n < syscall.NLMSG_HDRLEN {
			return os.NewSyscallError("recvfrom", syscall.EINVAL)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return os.NewSyscallError("parsenetlinkmessage", err)
		}
		for i := range msgs {
			m := &msgs[i]
			if m.Header.Seq != seq {
				continue
			}
			switch m.Header.Type {
			case syscall.NLMSG_DONE:
				return nil
			case syscall.NLMSG_ERROR:
				return os.NewSyscallError("rtnetlink", syscall.EINVAL)
			}
			if err := f(m); err != nil {
				return err
			}
		}
	}
}

func (v *netlinkView) addLink(m *syscall.NetlinkMessage) error {
	if len(m.Data) < syscall.SizeofIfInfomsg {
		return nil
	}
	ifim := (*syscall.IfInfomsg)(unsafe.Pointer(&m.Data[0]))
	attrs, err := syscall.ParseNetlinkRouteAttr(m)
	if err != nil {
		return os.NewSyscallError("parsenetlinkrouteattr", err)
	}
	l := netlinkLink{
		ifi:  net.Interface{Index: int(ifim.Index), Flags: linkFlags(ifim.Flags)},
		info: netdevInfo{kind: kindOfARPHRD(ifim.Type), operState: "unknown"},
	}
	for _, a := range attrs {
		switch a.Attr.Type {
		case syscall.IFLA_IFNAME:
			l.ifi.Name = string(bytes.TrimRight(a.Value, "\x00"))
		case syscall.IFLA_MTU:
			if len(a.Value) >= 4 {
				l.info.mtu = int(binary.NativeEndian.Uint32(a.Value))
				l.ifi.MTU = l.info.mtu
			}
		case syscall.IFLA_ADDRESS:
			if slices.ContainsFunc(a.Value, func(b byte) bool { return b != 0 }) {
				l.ifi.HardwareAddr = slices.Clone(a.Value)
			}
		case iflaOperState:
			if len(a.Value) >= 1 {
				l.info.operState = operStateName(a.Value[0])
			}
		}
	}
	v.links = append(v.links, l)
	return nil
}

func (v *netlinkView) addAddr(m *syscall.NetlinkMessage) error {
	if len(m.Data) < syscall.SizeofIfAddrmsg {
		return nil
	}
	ifam := (*syscall.IfAddrmsg)(unsafe.Pointer(&m.Data[0]))
	attrs, err := syscall.ParseNetlinkRouteAttr(m)
	if err != nil {
		return os.NewSyscallError("parsenetlinkrouteattr", err)
	}
	// As net.Interface.Addrs: for IPv4 the local address where the
	// kernel gives one (point-to-point links), else the address.
	var ip net.IP
	for _, a := range attrs {
		switch {
		case ifam.Family == syscall.AF_INET && a.Attr.Type == syscall.IFA_LOCAL && len(a.Value) == net.IPv4len:
			ip = net.IP(slices.Clone(a.Value))
		case a.Attr.Type == syscall.IFA_ADDRESS && ip == nil:
			switch {
			case ifam.Family == syscall.AF_INET && len(a.Value) == net.IPv4len,
				ifam.Family == syscall.AF_INET6 && len(a.Value) == net.IPv6len:
				ip = net.IP(slices.Clone(a.Value))
			}
		}
	}
	if ip != nil {
		v.addrs = append(v.addrs, netlinkAddr{index: int(ifam.Index), ip: ip})
	}
	return nil
}

// linkFlags is net.Interface's view of IFF_* flags.
func linkFlags(raw uint32) net.Flags {
	var f net.Flags
	for _, b := range [...]struct {
		iff  uint32
		flag net.Flags
	}{
		{syscall.IFF_UP, net.FlagUp},
		{syscall.IFF_BROADCAST, net.FlagBroadcast},
		{syscall.IFF_LOOPBACK, net.FlagLoopback},
		{syscall.IFF_POINTOPOINT, net.FlagPointToPoint},
		{syscall.IFF_MULTICAST, net.FlagMulticast},
		{syscall.IFF_RUNNING, net.FlagRunning},
	} {
		if raw&b.iff != 0 {
			f |= b.flag
		}
	}
	return f
}

// byName is the link named name, or nil.
func (v *netlinkView) byName(name string) *netlinkLink {
	for i := range v.links {
		if v.links[i].ifi.Name == name {
			return &v.links[i]
		}
	}
	return nil
}

// byIndex is the link with index i, or nil.
func (v *netlinkView) byIndex(index int) *netlinkLink {
	for i := range v.links {
		if v.links[i].ifi.Index == index {
			return &v.links[i]
		}
	}
	return nil
}

// loopback is lo, or else the first loopback link, or nil.
func (v *netlinkView) loopback() *netlinkLink {
	if l := v.byName("lo"); l != nil {
		return l
	}
	for i := range v.links {
		if v.links[i].ifi.Flags&net.FlagLoopback != 0 {
			return &v.links[i]
		}
	}
	return nil
}

// owning is the link that has address ip, or nil.
func (v *netlinkView) owning(ip net.IP) *netlinkLink {
	for _, a := range v.addrs {
		if a.ip.Equal(ip) {
			return v.byIndex(a.index)
		}
	}
	return nil
}

// gids lists the link's addresses as RoCE v2 GIDs, in the kernel's order,
// as gidTable does.
func (v *netlinkView) gids(l *netlinkLink) []infiniband.GIDEntry {
	var gids []infiniband.GIDEntry
	for _, a := range v.addrs {
		if a.index != l.ifi.Index {
			continue
		}
		gids = append(gids, infiniband.GIDEntry{
			Index:  len(gids),
			GID:    infiniband.GIDFromNetIP(a.ip),
			Type:   infiniband.GIDTypeRoCEv2,
			Netdev: l.ifi.Name,
		})
	}
	return gids
}
