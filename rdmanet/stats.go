package rdmanet

import (
	"sync/atomic"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

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
	// behind), "wc-error" (completion with an error status), "qp-reset"
	// (received but discarded when a QP error was recovered), and the
	// provider's reasons for bad packets on the wire ("bad-icrc",
	// "bad-qkey", ... on the software backend).
	//
	// On rdma-core no device tells a QP what it dropped: "device-overflow"
	// is the port's count, shared by every conn on it, since this conn
	// was opened: mlx5's out_of_buffer, or on rxe rcvd_pkts minus
	// rdma_recvs (packets that completed no receive). A multicast packet
	// that several QPs of the port receive counts once in rcvd_pkts and
	// once per QP in rdma_recvs, which hides as much loss: there, the
	// count is a lower bound. Which conn lost them cannot be known.
	Dropped map[string]uint64
	// SendErrors counts sends that completed with an error status.
	SendErrors uint64
	// Rejoins counts group rejoins after MULTICAST_ERROR events.
	Rejoins uint64
	// Recoveries counts QP resets after the QP went to the error state
	// (a link flap under a sending conn does that): see ErrLinkDown.
	Recoveries uint64
	// Device holds the growth, since the conn was opened, of its port's
	// device counters where the backend can read them (rdma-core: sysfs
	// hw_counters, such as rxe's rcvd_pkts and rdma_recvs or mlx5's
	// out_of_buffer). They are the port's, shared by every QP on it, not
	// this conn's. Nil where there are none.
	Device map[string]uint64
}

// ownLoopback is the drop reason under which a provider counts the QP's own
// multicast that it blocked (IBV_QP_CREATE_BLOCK_SELF_MCAST_LB).
const ownLoopback = "own loopback"

type counters struct {
	sent, received, truncated, loopback uint64
	wcErrors, sendErrors, rejoins       uint64
	recoveries, resetDrops              uint64
}

// Stats returns a snapshot of the conn's counters.
func (c *Conn) Stats() Stats {
	s := Stats{
		Sent:       atomic.LoadUint64(&c.ctr.sent),
		Received:   atomic.LoadUint64(&c.ctr.received),
		Truncated:  atomic.LoadUint64(&c.ctr.truncated),
		Loopback:   atomic.LoadUint64(&c.ctr.loopback),
		SendErrors: atomic.LoadUint64(&c.ctr.sendErrors),
		Rejoins:    atomic.LoadUint64(&c.ctr.rejoins),
		Recoveries: atomic.LoadUint64(&c.ctr.recoveries),
		Dropped:    map[string]uint64{},
	}
	if n := atomic.LoadUint64(&c.ctr.wcErrors); n > 0 {
		s.Dropped["wc-error"] = n
	}
	if n := atomic.LoadUint64(&c.ctr.resetDrops); n > 0 {
		s.Dropped["qp-reset"] = n
	}
	if dc, ok := c.qp.(verbs.DeviceCounter); ok {
		s.Device = dc.DeviceCounts()
	}
	if dc, ok := c.qp.(verbs.DropCounter); ok {
		for k, v := range dc.DropCounts() {
			switch {
			case v == 0:
			case k == ownLoopback:
				// Blocked by the device on request: not a loss.
				s.Loopback += v
			default:
				s.Dropped[k] += v
			}
		}
	}
	return s
}
