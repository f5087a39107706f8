// Package soft is the software verbs provider (verbs.Software): RoCEv2
// Unreliable Datagram over ordinary UDP sockets, wire-compatible with the
// kernel's Soft-RoCE (rxe), for machines without RDMA hardware. Importing
// it registers the provider.
//
// # Devices
//
// Every netdev is a device "sw-<netdev>" with one port: ACTIVE while the
// netdev is up, Ethernet link layer, active MTU infiniband.RoCEMTU of the
// netdev's (lo: 4096, 1500: 1024), and a GID table of the netdev's
// addresses as RoCE v2 GIDs. The netdev's kind, MTU and operational state
// come from rtnetlink, for the network namespace the process is in (never
// from /sys/class/net, which may show another namespace's), and the group
// limit from that namespace's net.ipv4.igmp_max_memberships (20, the
// kernel's default, where it cannot be read). A process
// keeps the links and addresses of the 4 namespaces it bound in last,
// read again when rtnetlink reports a change; a kept namespace's netlink
// socket holds it alive until a binding in a fifth drops it. Binding with
// neither Interface nor Addr means loopback (127.0.0.1 on lo), never the
// default route's interface. IPv6 (rdma6) bindings and groups return
// verbs.ErrNotSupported, as rdma_cm does for IPv6 groups on RoCEv2.
//
// # QPs and addresses
//
// A QP has a QPN unique in the network namespace: a process reserves
// QPNs in blocks of 256 (a random block, drawn again while another
// process holds it, up to 256 draws before it gives up; then QPNs in
// turn), each block held by an abstract unix socket
// "rdmanet-sw-qpns-%04x" that the process keeps while any of the block's
// QPNs is in use (and its last block after that), so a QP pays no fd for
// its QPN (qpn.go). A QP has
// two UDP sockets: a unicast one bound to the QP's own address, port 4791
// (every send leaves from it), and a multicast one with IP_MULTICAST_ALL
// off, which sees only the QP's own groups and binds 0.0.0.0:4791 at the
// QP's first join to receive (a send-only QP's never does). On loopback
// the QP's address is 127.q2.q1.q0, the bytes of its QPN, so that every QP
// on a host has its own; ID.Local reports it once the QP exists, and it is
// the GRH source peers see. On another netdev the address is the netdev's;
// QPs sharing it all send and receive multicast, but only one of them gets
// unicast datagrams (which one is the kernel's choice).
//
// # Sending
//
// PostSend builds BTH, DETH, [ImmDt], pad and ICRC into per-slot scratch
// and sends a batch with one sendmmsg, the payload straight from the
// registered arena or, for an inline send, the caller's buffer; a lone
// datagram is gathered into one buffer (its payload copied by the pass
// that computes its ICRC) and sent with sendto, which costs the kernel
// less than importing iovecs. The ICRC's CRC over a long payload is
// folded with AVX-512 VPCLMULQDQ where the CPU has it (roce.CRCUpdate). The ICRC
// of a flow's next datagram starts from the remembered CRC state of its
// headers, with the IP ID and PSN added through tables. Where the process
// may, the unicast socket sets IP_TRANSPARENT, which spares each send the
// kernel's FIB lookup for the 127.q.q.q source. Sockets send with DF set
// (IP_PMTUDISC_DO), so Linux puts IP ID 0 in the header, as the ICRC
// assumes. Consecutive WRs to one
// destination with one datagram length (the last may be shorter), up to
// 64 and 64 KiB, form a run that is one sendmmsg message with UDP_SEGMENT
// (UDP GSO): the kernel cuts it into datagrams late, numbering their IP
// IDs 0, 1, 2..., and each datagram's ICRC is sealed with its ID. Where
// the kernel refuses GSO the run is resent one datagram at a time with
// ICRCs resealed for ID 0, and the QP makes no more runs. Sends complete
// at once, and the kernel's errors are never lost: a lone WR's comes back
// from PostSend (the WR not posted), a batch's WRs complete with
// WCGeneralErr and the errno in WC.Errno. CreateAH looks up the route of a
// unicast DGID from the QP's address and fails as the kernel's lookup does
// (ENETUNREACH, EHOSTUNREACH).
//
// # Receiving
//
// Waiting is the backend's own (wait.go): the receive CQ's NewWaiter is
// a poller.Waiter in the netpoller, and the consumer only calls WaitPoll.
// The receive CQ's waiter sleeps on one of two fds: an epoll set over
// both sockets (wide), or the multicast socket alone (narrow), which the
// netpoller then watches directly (no nested epoll on the wake-up path).
// It sleeps narrow unless a unicast datagram came within its last 64
// waits. While it sleeps narrow, the CQ kicks it for what the narrow fd
// cannot show: a unicast datagram, which the one goroutine of a QP
// watches for through an epoll set holding only the unicast socket's
// EPOLLIN (the socket itself would also wake it on every send), and
// receives posted into an empty queue. The send CQ and the ID's event
// channel have no fd: PostSend completes every WR before it returns, and
// events are raised in Go (InjectEvent), so their waiters arm, poll
// again and sleep on a Go channel that a completion or event queued while
// armed, a deadline (a timer), Wake or Close leaves a note on.
// RecvCQ().Poll does the work, straight into the posted buffers:
// sleeping narrow it reads the multicast socket directly (recvmsg, or
// recvfrom on a socket without GRO, for one datagram when traffic is
// request/response, recvmmsg of up to 64 datagrams for a stream) and
// the unicast socket only when the watch saw datagrams
// there or the mode just turned narrow; sleeping wide it first asks the
// channel's epoll set, which holds both sockets then, which hold
// datagrams. Right after a wake it reads where the
// last datagram came from. A buffer with room for the largest datagram
// gets it whole (one iovec, headers in the GRH area), a shorter one gets
// it scattered over scratch. Then validation (BTH, P_Key, Q_Key,
// destination QPN and group, ICRC), a GRH area as rxe fills it for
// RoCEv2 over IPv4 (bytes 20-39 an IPv4 header), and one completion per
// datagram.
//
// Where runs arrive (a datagram's solved IP ID is not 0: a later segment
// of a GSO run the kernel cut) and while receives are posted, a socket
// has UDP_GRO (gro.go), so a run a sender sent as one GSO message arrives
// as one read: the kernel
// neither cuts it into a datagram per skb (on loopback it did so in the
// sender's context) nor queues them one by one, and a multicast run
// reaches every receiving socket on the host as a clone of one skb. The
// UDP_GRO control message gives the segment size; each datagram of the
// run (each with its own BTH, DETH and ICRC, sealed for IP ID 0, 1,
// 2, ..., which the ICRC check tries first) completes its own posted
// receive or is dropped and counted on its own. Every read of a GRO
// socket gives each slot an overflow past the posted buffer, a 68 KiB
// row of an area taken for the read from a pool all QPs share (mapped
// memory: an idle QP holds none, and only rows coalesced reads wrote
// are resident), so a read of up to 64 KiB is never truncated. An area
// given back stays mapped for the next read, up to 64 areas a process
// (64 rows, about 4.3 MiB of address space each, no swap reserved); past 8
// free ones, an area given back returns its pages to the system. The
// slots up to the first coalesced one complete in place as without GRO;
// from it on, each datagram is copied into the next posted buffer by the
// pass that checks its ICRC. Datagrams for which no receive is posted or
// no completion asked for stay in the area for the next Poll, as they
// would have in the socket buffer. GRO goes off after 256 reads with no
// run (request/response traffic keeps the cheaper reads without it: one
// iovec, no control room, recvfrom), and at a Poll that finds no receive
// posted, until receives are posted again: the kernel counts a
// run it drops from a full socket buffer once (sk_drops counts skbs),
// so while the socket buffer is what holds datagrams they queue one by
// one and Drops.Overflow counts each. A consumer that stops reading with
// receives posted keeps GRO on, and a run dropped then counts once. A
// kernel without UDP_GRO (before 5.0) refuses it and the QP goes
// without. Because of that count a QP has GRO only when it asks
// (QPConfig.GRO, rdmanet's ListenConfig.SoftwareGRO). The self filter sees a run's
// first datagram, whose sender is every datagram's, and drops the whole
// run; an nftables rule (or any netfilter hook) also sees the run as one
// skb and drops or passes it whole, with or without GRO. The header's destination comes from IP_ORIGDSTADDR, except
// for a QP created with GRHAddressesOnly wherever it is known without:
// on the unicast socket (bound to the QP's address) and on the multicast
// socket while one group is joined and the socket was read dry since the
// last join or leave. Those reads are bare, with no control messages,
// and IP_RECVORIGDSTADDR is switched off meanwhile; other QPs also get
// IP_TTL and IP_TOS.
// A QP made with BlockSelfMulticastLoopback has a classic BPF socket
// filter on its multicast socket that drops, in the kernel, the copies of
// its own multicast the kernel loops back (source address and port 4791
// its own, DETH source QP its QPN: selffilter.go), so they neither wake
// nor cost a read; the same check in Go drops what passes a kernel
// without socket filters.
// Datagrams that fail are dropped and counted (QP.Drops); their buffers
// stay posted. With no receive posted, datagrams wait in the socket buffer
// and the kernel drops the overflow, counted as Drops.Overflow.
//
// # Counters and faults
//
// The device counters (QP.DeviceCounts) are the UDP MIB of the QP's
// network namespace, since the QP was made (counters.go; QPs made within
// 10 ms of each other in a namespace share the reading they start from,
// so counts from up to 10 ms before may show): the kernel's UDP
// layer is what drops this backend's datagrams, as a port drops a
// device's. A UDP socket has no error state, so a QP enters one only when
// InjectEvent raises EventQPError on its ID, as QP_FATAL does on a device:
// its sends are then flushed and Ready is false until Reset, which empties
// the receive queue and joins the QP's groups again in place, keeping its
// QPN and sockets (reset.go).
//
// # The wire format
//
// Headers, the ICRC and the cutting of GSO runs are package roce's pure
// functions; this package sends and receives what they build. The ICRC
// covers the IPv4 Identification and flags, which a UDP socket cannot
// see: the receiver solves for them (roce.SolveIPv4ID), so a corrupted
// datagram passes with probability 2^-15 instead of 2^-32.
package soft
