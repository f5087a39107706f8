package rdmanet

import "github.com/go-rdma/rdmanet/internal/verbs"

// ackBatch is how many CQ events are collected before one
// ibv_ack_cq_events call (acking takes a mutex in libibverbs).
const ackBatch = 32

// chanAcker drains a completion channel and acknowledges its events in
// batches. Every event must be acked before the CQ is destroyed: ackAll.
type chanAcker struct {
	cq      verbs.CQ
	ch      verbs.Channel
	unacked int
}

func (a *chanAcker) Arm() error { return a.cq.ReqNotify() }

// Drain reads the channel once: GetEvents itself reads until EAGAIN, so a
// second call would only cost a read(2) that says EAGAIN again.
func (a *chanAcker) Drain() (int, error) {
	total, err := a.ch.GetEvents()
	a.unacked += total
	if err != nil {
		return total, err
	}
	if a.unacked >= ackBatch {
		a.ch.AckEvents(a.unacked)
		a.unacked = 0
	}
	return total, nil
}

func (a *chanAcker) ackAll() {
	if a.ch != nil && a.unacked > 0 {
		a.ch.AckEvents(a.unacked)
		a.unacked = 0
	}
}

// recvSource is the receive CQ as the poller sees it: Poll fills the
// conn's pending completions.
type recvSource struct {
	chanAcker
	c    *Conn
	hint verbs.WakeHinter // the channel, when it takes wake-up hints
}

func (s *recvSource) Poll() (int, error) { return s.c.pollRecv() }

// Woken passes the poller's news on to a channel that can use it.
func (s *recvSource) Woken() {
	if s.hint != nil {
		s.hint.Woken()
	}
}

// sendSource is the send CQ: Poll reclaims send slots.
type sendSource struct {
	chanAcker
	c *Conn
}

func (s *sendSource) Poll() (int, error) { return s.c.reapSends() }
