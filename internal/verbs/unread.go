package verbs

// UnreadCQ is a receive CQ asked, without taking anything from it,
// whether the next Poll would find completions. The software provider's
// receive CQ can tell: its datagrams wait in its sockets' receive queues
// until Poll reads them. rdma-core's cannot: ibv_poll_cq takes the
// completions it finds, and there is no verb that only looks, so it
// answers known false (the caller may poll and keep what it finds).
type UnreadCQ interface {
	// Unread reports whether the next Poll would find something (a
	// datagram queued on a socket, or one a read already took and the CQ
	// has not completed yet), and known whether the CQ can tell at all.
	// Pending is false once the CQ is closed. It may be called from any
	// goroutine, also while a waiter sleeps on the CQ.
	Unread() (pending, known bool)
}
