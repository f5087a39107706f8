package ipoib_test

import (
	"fmt"
	"net/netip"

	"github.com/go-rdma/rdmanet/ipoib"
)

// The MGIDs one IPv4 group becomes on each kind of fabric.
func Example() {
	group := netip.MustParseAddr("239.1.2.3")
	ib, _ := ipoib.IPoIBMGID(group, ipoib.DefaultPKey, ipoib.DefaultScope)
	cm, _ := ipoib.RDMACMMGID(group, ipoib.DefaultPKey, ipoib.DefaultScope)
	v2, _ := ipoib.RoCEv2MGID(group)
	v1, _ := ipoib.RoCEv1MGID(group)
	fmt.Println("IPoIB:  ", ib)
	fmt.Println("rdma_cm:", cm)
	fmt.Println("RoCE v2:", v2)
	fmt.Println("RoCE v1:", v1)
	// Output:
	// IPoIB:   ff12:401b:ffff::f01:203
	// rdma_cm: ff12:4001:ffff::f01:203
	// RoCE v2: ::ffff:239.1.2.3
	// RoCE v1: ff0e::ffff:ef01:203
}

// A limited-member P_Key maps like the full-member one: IPoIB sets the
// membership bit before it builds MGIDs.
func ExampleIPoIBMGID_partition() {
	group := netip.MustParseAddr("239.1.2.3")
	m, _ := ipoib.IPoIBMGID(group, 0x0001, ipoib.ScopeSiteLocal)
	fmt.Printf("%v P_Key %#04x scope %v\n", m, m.PKey(), m.Scope())
	// Output: ff15:401b:8001::f01:203 P_Key 0x8001 scope 0x5 site-local
}

// Reading an MGID back into the groups it can have come from.
func ExampleMGID_Origins() {
	m, _ := ipoib.ParseMGID("ff12:4001:ffff::f01:203")
	for _, o := range m.Origins() {
		fmt.Printf("%s: %v\n", o.Mapping, o.Group)
	}
	// Output:
	// rdma_cm UDP on InfiniBand: 239.1.2.3
	// RoCE v1/v2 IPv6: ff12:4001:ffff::f01:203
}

// An IPoIB hardware address, as `ip link` prints it.
func ExampleParseLinkAddr() {
	a, _ := ipoib.ParseLinkAddr("80:00:00:48:fe:80:00:00:00:00:00:00:00:02:c9:03:00:a1:b2:c1")
	fmt.Printf("connected=%v qpn=%#x gid=%v\n", a.Connected(), a.QPN(), a.GID())
	// Output: connected=true qpn=0x48 gid=fe80::2:c903:a1:b2c1
}

// Which RDMA port is under an interface, and the MGID its P_Key gives a
// group. The root is a fake sysfs tree; use "/" for the running system.
func ExampleDiscover() {
	sys, err := ipoib.Discover("testdata/fabric")
	if err != nil {
		fmt.Println(err)
		return
	}
	b, _ := sys.InterfaceFor("ib0.8001")
	fmt.Printf("%s port %d GID[%d] %v\n", b.Device, b.Port, b.GIDIndex, b.GID)

	n := sys.Netdev("ib0.8001")
	bc := n.Broadcast.MGID()
	m, _ := ipoib.RDMACMMGID(netip.MustParseAddr("239.1.2.3"), bc.PKey(), bc.Scope())
	fmt.Println(m)

	p := sys.Port("rxe0", 1)
	fmt.Println(p.State, p.LinkLayer, p.ActiveMTU, p.GIDs[1].GID, p.GIDs[1].Type)
	// Output:
	// mlx5_0 port 1 GID[0] fe80::2:c903:a1:b2c1
	// ff12:4001:8001::f01:203
	// ACTIVE Ethernet 1024 ::ffff:10.99.0.1 RoCE v2
}
