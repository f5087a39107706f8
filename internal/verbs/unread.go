package verbs

// UnreadCQ is a receive CQ that can tell, without taking anything from
// it, whether the next Poll would find completions. The software
// provider's receive CQ is one: its datagrams wait in its sockets'
// receive queues until Poll reads them. rdma-core's is not: ibv_poll_cq
// takes the completions it finds, and there is no verb that only looks.
type UnreadCQ interface {
	// Unread reports whether the next Poll would find something: a
	// datagram queued on a socket, or one a read already took and the
	// CQ has not completed yet. False once the CQ is closed. It may be
	// called from any goroutine, also while a waiter sleeps on the CQ.
	Unread() bool
}
