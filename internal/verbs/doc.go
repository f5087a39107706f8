// Package verbs is rdmanet's provider-neutral model of the RDMA verbs and of
// the connection manager (rdma_cm) it needs for Unreliable Datagram (UD)
// multicast.
//
// Two providers implement it:
//
//   - rdma-core (package rdmacore): libibverbs and librdmacm through cgo,
//     loaded at run time; real NICs and the kernel's Soft-RoCE (rxe).
//   - software (package soft): pure Go RoCEv2 over UDP sockets, for
//     machines without RDMA hardware; wire-compatible with rxe.
//
// The model keeps verbs semantics on both: receives must be posted before a
// message arrives (a message that finds none is dropped) and work completes
// through completion queues (CQ). Waiting is the provider's: a CQ's
// CQWaiter (CQ.NewWaiter) wait-polls it in the Go netpoller, and each
// provider keeps its own wake-up protocol inside it (rdma-core arms, polls
// again, drains and acks its completion channel; the software provider
// watches its sockets), so a consumer only polls or wait-polls. No C type
// appears in this API, and the hot-path calls (PostRecv, PostSend, Poll,
// WaitPoll) take caller-owned slices so that a batch is one call (one cgo
// crossing on rdma-core) and nothing is allocated per message.
//
// The object tree follows libibverbs: a Provider binds an ID (an rdma_cm_id
// in the UDP port space) to a local port; the ID owns one UD QP with its PD,
// CQs and completion channels, the memory regions registered on it and the
// address handles made from it. Closing the ID frees everything under it.
//
// The names of the fabric are internal/infiniband's: the model uses its
// GIDEntry, LinkLayer, GIDType and PortState as they are, and GID (an MGID
// is a GID) under the alias GID. They are the types ipoib exports and
// rdmanet.Addr carries, so nothing converts between layers. The model
// depends on no package that exists for users (ipoib, rdmanet); its
// providers read sysfs through internal/infiniband/sysfs.
package verbs
