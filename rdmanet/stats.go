package rdmanet

import "sync/atomic"

// Stats counts what a Conn did. Counters only grow.
type Stats struct {
	Sent     uint64 // datagrams handed to the QP
	Received uint64 // datagrams returned to the caller
	// Truncated counts datagrams longer than the read buffer: the rest
	// was discarded, as with UDP.
	Truncated uint64
	// Loopback counts own multicast messages not delivered because
	// loopback is off (blocked by the device, or filtered by the conn).
	Loopback uint64
	// Dropped counts datagrams lost before the caller could read them, by
	// reason: "overflow" (no receive buffer posted: the receiver fell
	// behind), "wc-error" (completion with an error status), and the
	// provider's reasons for bad packets on the wire ("bad-icrc",
	// "bad-qkey", ... on the software backend).
	Dropped map[string]uint64
	// SendErrors counts sends that completed with an error status.
	SendErrors uint64
	// Rejoins counts group rejoins after MULTICAST_ERROR events.
	Rejoins uint64
}

// ownLoopback is the drop reason under which a provider counts the QP's own
// multicast that it blocked (IBV_QP_CREATE_BLOCK_SELF_MCAST_LB).
const ownLoopback = "own loopback"

type counters struct {
	sent, received, truncated, loopback uint64
	wcErrors, sendErrors, rejoins       uint64
}

// Stats returns a snapshot of the conn's counters. After Close it returns
// the counters as they stood at Close.
func (c *Conn) Stats() Stats {
	s := Stats{
		Sent:       atomic.LoadUint64(&c.ctr.sent),
		Received:   atomic.LoadUint64(&c.ctr.received),
		Truncated:  atomic.LoadUint64(&c.ctr.truncated),
		Loopback:   atomic.LoadUint64(&c.ctr.loopback),
		SendErrors: atomic.LoadUint64(&c.ctr.sendErrors),
		Rejoins:    atomic.LoadUint64(&c.ctr.rejoins),
		Dropped:    map[string]uint64{},
	}
	if n := atomic.LoadUint64(&c.ctr.wcErrors); n > 0 {
		s.Dropped["wc-error"] = n
	}
	for k, v := range c.qpDropCounts() {
		switch {
		case v == 0:
		case k == ownLoopback:
			// Blocked by the device on request: not a loss.
			s.Loopback += v
		default:
			s.Dropped[k] += v
		}
	}
	return s
}
