package verbs

// DropCounter is implemented by QPs that can say how many received packets
// they dropped, by reason ("bad ICRC", "bad Q_Key", "receive queue
// overflow", ...). The software provider's QP implements it; on rdma-core
// the kernel's port and hw counters hold the equivalents. Reading the
// counters allocates; counting does not.
type DropCounter interface {
	DropCounts() map[string]uint64
}
