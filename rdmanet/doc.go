// Package rdmanet gives Go programs RDMA multicast behind net.PacketConn.
//
// ListenMulticast has the shape of net.ListenMulticastUDP and returns a
// *Conn whose ReadFrom and WriteTo are backed by an InfiniBand/RoCE
// Unreliable Datagram (UD) queue pair joined to a multicast group:
//
//	group := &net.UDPAddr{IP: net.IPv4(239, 1, 2, 3)}
//	c, err := rdmanet.ListenMulticast("rdma", nil, group) // nil: loopback
//	if err != nil { ... }
//	defer c.Close()
//	c.WriteTo([]byte("hello"), group)
//	n, from, err := c.ReadFrom(buf) // from is an *rdmanet.Addr (GID, QPN)
//
// # Backends
//
// Two backends share one datapath. "rdma-core" drives real NICs and the
// kernel's Soft-RoCE (rxe) through libibverbs and librdmacm, loaded at run
// time. "software" is pure Go: it speaks RoCEv2 (UDP port 4791) on the
// chosen interface, wire-compatible with rxe, and runs anywhere. The
// default, "auto", takes rdma-core when an active RDMA port serves the
// interface or address, and software otherwise; ListenConfig.Backend or
// the RDMANET_BACKEND environment variable chooses. Conn.Backend says
// which one a conn got.
//
// A nil interface means loopback: rdmanet never picks "the interface of
// the default route" by itself.
//
// # What UD multicast means
//
// A datagram is one packet: at most MTU() bytes (1024 on RoCE with a
// 1500-byte netdev MTU, 4096 on loopback and InfiniBand). Longer writes fail
// with ErrMessageTooLong; nothing is split. Delivery is unreliable: a
// datagram that finds no receive buffer posted is dropped, and Stats counts
// it. The group's UDP port has no meaning and is ignored.
//
// Multicast loopback is on, as with UDP: a conn receives its own group
// messages unless ListenConfig.DisableLoopback or SetMulticastLoopback(false).
//
// # Addresses
//
// ReadFrom returns the sender as an *Addr: its GID and QP number (and IP on
// RoCE, from the GID). WriteTo takes the group's *net.UDPAddr, an *Addr
// naming a joined group's MGID, or a peer's *Addr for a unicast UD
// datagram. Anything else is an error.
//
// # Performance
//
// ReadFromAddr returns the sender as a value and allocates nothing;
// ReadBatch and WriteBatch move many datagrams with one completion-queue
// poll or one post. Receive buffers and send slots live in memory mapped
// outside the Go heap and registered once. Completions are waited for in
// Go's netpoller (no thread per conn); ListenConfig.Spin polls a while
// before sleeping.
package rdmanet
