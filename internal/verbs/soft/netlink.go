package soft

import (
	"encoding/binary"
	"fmt"
	"os"
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
