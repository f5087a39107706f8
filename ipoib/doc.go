// Package ipoib translates between the names users give multicast traffic
// (IP groups, interface names) and the names RDMA fabrics use (MGIDs,
// GIDs, P_Keys, devices and ports).
//
// Each layer maps an IP group to a multicast GID differently, and a wrong
// mapping fails silently: two programs that should meet on a group join
// two different MGIDs and never hear each other. The functions here follow
// the Linux kernel byte for byte, and the tests check them against
// transcriptions of the kernel's own code.
//
// # Mappings
//
// For the IPv4 group 239.1.2.3 on the default partition (P_Key 0xffff) and
// link-local scope:
//
//	IPoIB (RFC 4391, ip_ib_mc_map)    ff12:401b:ffff::f01:203
//	rdma_cm RDMA_PS_UDP on InfiniBand ff12:4001:ffff::f01:203
//	rdma_cm on RoCE v2                ::ffff:239.1.2.3
//	rdma_cm on RoCE v1                ff0e::ffff:ef01:203
//	IPoIB broadcast group             ff12:401b:ffff::ffff:ffff
//
// IPoIBMGID, RDMACMMGID, RoCEv2MGID, RoCEv1MGID and BroadcastMGID compute
// them. On InfiniBand the P_Key and scope come from the IPoIB interface's
// broadcast address (Netdev.Broadcast), and the kernel always sets the
// P_Key's full-member bit: 0x7fff and 0xffff name the same groups. An IPv4
// group keeps its low 28 bits, which restore it exactly, since every IPv4
// multicast address starts with 1110; an IPv6 group keeps only its low 80
// bits. MGID.Origins is the reverse mapping: every way an MGID can have
// come from an IP group.
//
// # Addresses
//
// GID is a 16-byte array that parses and prints in colon-hex form,
// compressed (String) or in the eight-group form sysfs uses
// (StringExpanded). MGID is the same type: an MGID is a GID that names a
// group, and its Scope, PKey, Signature and Origins read the IB forms.
// It is the one GID type of the module: rdmanet.Addr's GID is an
// ipoib.GID, and the verbs layer underneath uses the same type, so
// nothing converts between them. LinkAddr is the 20-byte IPoIB hardware
// address: flags (0x80 for connected mode), a 24-bit QPN and the port GID.
//
// # Discovery
//
// Discover reads /sys/class/infiniband and /sys/class/net under a root
// directory ("/" for the running system, a fake tree in tests) and returns
// the RDMA devices, their ports (state, link layer, GID table with types
// and netdevs, P_Keys) and the network interfaces with the RDMA port under
// each. System.InterfaceFor and System.PortForIP answer "which device,
// port and GID index do I use for ib0 / for 192.168.10.5". On the running
// system the network interfaces are those of the caller's network
// namespace (as net.Interfaces lists them), also where the mounted sysfs
// shows another namespace's, as after a plain `unshare -n`.
//
// sysfs does not show everything ibv_devinfo does. A port's active MTU is
// derived (see Port.ActiveMTU), and whether a device supports multicast is
// known only from its transport (Device.Multicast): max_mcast_grp needs
// ibv_query_device, which a verbs backend should use to refine it.
package ipoib
