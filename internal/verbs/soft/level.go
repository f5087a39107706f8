package soft

// LevelTriggered implements verbs.LevelTriggered: the receive channel's
// fds (the epoll set over both sockets, the multicast socket) are
// readable while a datagram waits, and Poll reads until it finds a
// completion or both sockets are dry (dropping bad datagrams on the way).
// So after Poll returned 0 they are quiet (or no receive is posted, and
// PostRecv kicks), and a waiter may sleep at once: there is nothing to
// arm or drain.
func (ch *recvChannel) LevelTriggered() bool { return true }

// Woken implements verbs.WakeHinter: the fd just woke a waiter, so the next
// Poll reads the socket that last had datagrams at once instead of asking
// epoll first.
func (ch *recvChannel) Woken() { ch.woken.Store(true) }
