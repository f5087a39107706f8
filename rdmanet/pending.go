package rdmanet

import "github.com/go-rdma/rdmanet/rdmanet/internal/unread"

func init() {
	unread.Check = func(conn any) (bool, bool) { return conn.(*Conn).unread() }
}

// unread reports whether datagrams received by c wait to be read, for
// rdmanet/reliable, which holds back a NAK while its receiver has not
// read what may already answer it. known is false when it cannot tell.
//
// In order: completions polled and not yet handed out (a ReadBatch
// shorter than them left the rest); then what the receive CQ holds,
// where the provider can look without taking anything (the CQ's Unread:
// the software provider's sockets); else, when no read is in progress,
// one poll of the CQ, whose completions stay pending for the next read
// (rdma-core: ibv_poll_cq). While a read holds the CQ on rdma-core
// (blocked in its wait, or handing out a batch) it cannot tell.
func (c *Conn) unread() (pending, known bool) {
	if c.closed.Load() {
		return false, true
	}
	r := &c.rd
	locked := r.mu.TryLock()
	if locked {
		defer r.mu.Unlock()
		if r.count > 0 {
			return true, true
		}
	}
	if pending, known := c.qp.RecvCQ().Unread(); known {
		return pending, true
	}
	if !locked {
		return false, false
	}
	n, err := c.pollRecv(false)
	if err != nil {
		return false, false
	}
	return n > 0, true
}
