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
// Backends reports, like net.Interfaces, which backends run on this
// machine (or why not, wrapping ErrUnavailable) and the devices each
// sees: name, node GUID, multicast limits, and per port the state, link
// layer, active MTU, netdev and GID table. Devices is the flat list;
// ListenConfig.Device names one of them. ipoib.Discover shows what
// sysfs knows of the same devices (node types, P_Keys, IPoIB
// interfaces); command rdmanet's "devices" prints both.
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
// RoCE, from the GID); ReadFromAddr, the counterpart of net.UDPConn's
// ReadFromUDP, returns it as a value. WriteTo, JoinGroup, LeaveGroup and
// GroupAddr take the same types for a group: a multicast *net.UDPAddr or
// *net.IPAddr (the port is ignored), or an *Addr naming its MGID
// (AddrFromMGID makes one); WriteTo also takes a peer's *Addr for a
// unicast UD datagram. nil, and a nil pointer of those types, is a
// missing address, and anything else an error, as with net.UDPConn. A
// conn keeps the address handles of up to 1024 unicast peers (one GID
// each); a write to another past those drops one of them, made again at
// that peer's next write.
//
// # Errors
//
// Every error is a *net.OpError, as net.UDPConn's, and no datagram is lost
// without an error or a count. A write longer than MTU() fails with
// ErrMessageTooLong before anything is sent. A datagram the kernel refuses
// returns the kernel's errno from that WriteTo (errors.Is(err,
// syscall.EMSGSIZE), ENETUNREACH, EHOSTUNREACH, EPERM, ENOBUFS, ...); a
// unicast peer that cannot be reached fails when its address handle is
// made, at the first write to it, as ibv_create_ah does on RoCE. A failure
// known only after its write returned (a message of a WriteBatch, a
// device's error completion) is counted and returned by the next write,
// wrapped with ErrEarlierSendFailed; that write sends nothing.
//
// # Stats
//
// Stats counts what was sent, received, truncated, and lost. Its maps are
// keyed by exported constants, which are API: Stats.Dropped by DropOverflow
// ("overflow": the receiver fell behind), DropWCError ("wc-error") and
// the software backend's reasons for packets bad on the wire (DropBadICRC
// "bad-icrc", DropBadQKey "bad-qkey", ...; all in DropReasons), and
// Stats.SendFailed by the SendErr* reasons ("message-too-long",
// "network-unreachable", ...; all in SendErrorReasons).
//
// # Limits
//
// Groups per conn: on the software backend a conn's full-member groups are
// IP memberships of one socket, so the kernel's
// net.ipv4.igmp_max_memberships caps them (default 20, set per network
// namespace; `sysctl -w net.ipv4.igmp_max_memberships=N` raises it);
// send-only groups do not count. On rdma-core the device's limits apply:
// max_mcast_grp groups, max_mcast_qp_attach QPs (conns) in one group and
// max_total_mcast_qp_attach attachments (rxe: 8192, 56 and 458752;
// `ibv_devinfo -v` shows them). A join past a limit fails with
// ErrGroupLimit, and the error names the limit and its value.
//
// Each conn is one UD QP. On the software backend, with the default depths
// and MTU 4096, it holds 4 file descriptors (two UDP sockets and the
// epoll sets its receive waiter and unicast watch sleep on; its send CQ
// and event channel need none, and the process reserves QPNs 256 at a
// time, one socket a block), 2 goroutines, about 20 KiB resident while
// idle (scratch that grows when traffic needs it) and 1.3 MiB of memory mapped for its rings (RecvDepth
// 64 and SendDepth 256 slots of MTU plus 40 bytes, rounded to 64), of
// which what datagrams touched is resident (290 KiB after 64 of 1 KiB),
// plus the kernel's socket buffers (4 MiB asked for each way, capped by
// net.core.rmem_max and wmem_max, used only while datagrams wait;
// SetReadBuffer and SetWriteBuffer change them as on net.UDPConn, and
// ReadBuffer and WriteBuffer say what the kernel granted). Close
// of a conn in 1000 groups takes as long as a UDP socket's. On rdma-core
// (measured on rxe, MTU 1024, RecvDepth 512) it holds 6 file descriptors,
// 1 goroutine and 1.3 to 1.6 MiB resident: its rings (0.8 MiB, registered
// with the device and so pinned) and the provider's queues.
// TestPerConnCost and BenchmarkCost* (beside net.UDPConn)
// measures both. ListenConfig refuses negative values and values over
// each field's bound (its doc; docs/errors-and-limits.md has the table),
// naming the field.
//
// # Performance
//
// ReadFromAddr returns the sender as a value and allocates nothing;
// ReadBatch and WriteBatch move many datagrams with one completion-queue
// poll or one post: a read polls up to 64 receive completions at once,
// and a write posts up to 64 messages. Receive buffers and send slots
// live in memory mapped outside the Go heap and registered once.
// Completions are waited for in Go's netpoller (no thread per conn);
// ListenConfig.Spin polls a while before sleeping. How a wait sleeps and
// wakes is the backend's own (each builds its CQs' waiters on
// internal/poller): a read reposts the buffers it consumed, then
// wait-polls the receive CQ.
//
// # Sending without a copy
//
// A write copies a datagram longer than the QP's inline limit into the
// conn's send ring, and posts a shorter one inline. A program that keeps
// what it sends (a retransmit window, a ring of prepared messages)
// allocates it with NewSendBuffer instead: memory registered with the
// conn's protection domain, from which WriteTo and WriteBatch post by the
// memory region's key and offset, with no copy (Stats.SentRegistered).
// The device then reads the bytes after the write returned: they must
// not change until the send completed, which SendsPosted, SendsDone and
// WaitSends tell without an allocation or a system call per message (see
// SendBuffer). rdmanet/reliable keeps its window so.
package rdmanet
