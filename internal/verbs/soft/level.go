package soft

// LevelTriggered implements verbs.LevelTriggered: the receive channel is an
// epoll fd over the QP's sockets, readable exactly while Poll would find a
// datagram for a posted receive. There is nothing to arm or drain.
func (ch *recvChannel) LevelTriggered() bool { return true }
