package verbs

// Drop reasons: the keys of QP.DropCounts. rdmanet's Stats.Dropped
// exports them under the same names, defined from these.
const (
	// DropOverflow counts datagrams that found no receive buffer posted in
	// time: the socket buffer (software) or the receive queue overflowed.
	DropOverflow = "overflow"
	// DropWCError counts receives that completed with an error status.
	DropWCError = "wc-error"
	// DropTruncated through DropTooLong are the software provider's
	// reasons for packets bad on the wire.
	DropTruncated = "truncated"  // shorter than its headers and ICRC
	DropBadTVer   = "bad-tver"   // BTH TVer not 0
	DropBadOpcode = "bad-opcode" // not UD SEND_ONLY[/WITH_IMMEDIATE]
	DropBadPKey   = "bad-pkey"   // P_Key neither 0xFFFF nor 0x7FFF
	DropBadQKey   = "bad-qkey"   // DETH Q_Key not the QP's
	DropBadICRC   = "bad-icrc"   // ICRC does not match
	DropBadPad    = "bad-pad"    // PadCnt longer than the payload
	DropNotForUs  = "not-for-us" // dest QPN not ours, or a group not joined
	DropTooLong   = "too-long"   // longer than the posted receive buffer
	// DropDeviceOverflow (rdma-core) is the port's count of messages that
	// completed no receive (mlx5 out_of_buffer; rxe rcvd_pkts -
	// rdma_recvs), shared by every QP on the port.
	DropDeviceOverflow = "device-overflow"
	// DropOwnLoopback counts the QP's own multicast, blocked on request
	// (BlockSelfMulticastLoopback). Not a loss: rdmanet counts it in
	// Stats.Loopback.
	DropOwnLoopback = "own-loopback"
)
