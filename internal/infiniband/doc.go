// Package infiniband is the module's one vocabulary for the names an RDMA
// fabric uses.
//
//   - GID is the one 128-bit GID type: a port's GID table entry, a
//     sender's address, a group's MGID (MGID is the same type). ipoib
//     exports it as ipoib.GID, the verbs model as verbs.GID and
//     rdmanet.Addr carries it: one type under three names, so nothing
//     converts between them.
//   - The enums sysfs and the verbs share (LinkLayer, GIDType,
//     PortState, NodeType, NetdevKind), a GID table entry (GIDEntry), the
//     IPoIB hardware address (LinkAddr), IB and RoCE MTUs, the scope,
//     P_Key and signature fields of IB MGIDs and the reverse mapping of an
//     MGID to the IP groups it can have come from (GID.Origins).
//
// It exists so that the public ipoib package and the internal verbs model
// share one definition without the model depending on a package that is
// there for users: ipoib is a thin layer of aliases and wrappers over it
// (plus the IP group to MGID mappings), and the providers under
// internal/verbs use it directly. Reading the devices sysfs shows is
// package sysfs's (internal/infiniband/sysfs).
//
// # Files
//
//	gid.go       GID (and MGID), parsing and printing
//	mgid.go      scope, P_Key and signature of IB MGIDs; Origins
//	linkaddr.go  the 20-byte IPoIB hardware address
//	enums.go     link layer, GID type, port state, node type, netdev
//	             kind, GID table entry
//	mtu.go       IB MTUs and RoCE's path MTU (iboe_get_mtu)
//
// Errors begin "ipoib:", the name of the package users call (and what
// they said before the code moved here). The tests of the mappings are
// ipoib's, through its exported names; gid_test.go here tests what the
// datapath calls.
package infiniband
