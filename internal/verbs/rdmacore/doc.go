// Package rdmacore is the rdma-core provider of package verbs: libibverbs
// and librdmacm through cgo, for real RDMA NICs and the kernel's Soft-RoCE
// (rdma_rxe). It registers itself as verbs.RDMACore ("rdma-core") from
// init; import it for that side effect.
//
// # Loading
//
// rdma-core is not linked: libibverbs.so.1 and librdmacm.so.1 are opened
// with dlopen on first use, so a program starts on a machine without them
// and Available reports an error wrapping verbs.ErrUnavailable that says
// how to install them. The package builds without rdma-core's headers:
// rdma_abi.h declares the few structs it uses, and TestABI proves them
// against <infiniband/verbs.h> and <rdma/rdma_cma.h> where those are
// installed. Built with CGO_ENABLED=0 the provider is still registered and
// says it was built without cgo.
//
// # Getting a device
//
// Without RDMA hardware, Soft-RoCE gives real verbs on any Ethernet
// netdev:
//
//	modprobe rdma_rxe
//	rdma link add rxe0 type rxe netdev veth0
//
// `make test-rxe` runs this package's device tests in a QEMU VM that does
// just that; the tests run when RDMANET_TEST_DEVICE and RDMANET_TEST_ADDR
// name the device and its address.
//
// # Objects
//
// Bind is rdma_create_id(RDMA_PS_UDP) + rdma_bind_addr on its own event
// channel. CreateQP allocates a PD, a send and a receive CQ each with its
// own completion channel, and creates the UD QP with rdma_create_qp_ex, so
// that librdmacm moves it to RTS and attaches it to the groups it joins.
// Close destroys the QP, AHs, CQs, channels, MRs and PD, then the cm id and
// its channel.
//
// # Data path
//
// PostRecv, PostSend and Poll cross into C once per batch of up to 64
// requests and allocate nothing: RecvWR and WC are read and written by C in
// place (their layout is checked when the library is loaded), sends are
// flattened into a per-QP buffer. The static inline verbs (ibv_post_send,
// ibv_post_recv, ibv_poll_cq, ibv_req_notify_cq) are called through the
// context's ops table, as verbs.h does.
//
// # Conventions
//
//   - Imm is a host value: SendWR.Imm is sent as htonl(Imm) and WC.Imm is
//     ntohl(imm_data), so 0x01020304 is the bytes 01 02 03 04 on the wire.
//   - Waiting is here (wait.go): a CQ's NewWaiter is a poller.Waiter on a
//     dup of the completion channel's fd (channel fds are non-blocking and
//     owned by the channel, closed by ibv_destroy_comp_channel) that runs
//     the channel protocol: poll, arm, poll again, sleep; woken, read the
//     channel (ibv_get_cq_event, one crossing, at most the events the
//     CQ's arms may still raise) and poll. Events are acknowledged once,
//     by AckEvents, which batches ibv_ack_cq_events; events not acked
//     when the ID closes are acked then. docs/rdmacore-wakeups.md gives
//     what a wake-up costs.
//   - Multicast loopback is on: on rxe a QP joined as a full member
//     receives its own multicast sends (IBV_QP_CREATE_BLOCK_SELF_MCAST_LB
//     is refused by rxe and LoopbackBlocked reports false).
//   - The MR returned by RegisterMemory has a Close method
//     (ibv_dereg_mr) for callers that must unregister before the ID closes.
package rdmacore
