package rdmanet

import (
	"errors"
	"os"
	"sync/atomic"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// Stats counts what a Conn did. Counters only grow.
type Stats struct {
	Sent uint64 // datagrams handed to the QP
	// SentRegistered counts the datagrams of Sent posted from a
	// SendBuffer's registered memory, with no copy; SentCopied those
	// copied into the conn's send ring (longer than the inline limit).
	// The rest were posted inline.
	SentRegistered uint64
	SentCopied     uint64
	Received       uint64 // datagrams returned to the caller
	// Truncated counts datagrams longer than the read buffer: the rest
	// was discarded, as with UDP.
	Truncated uint64
	// Loopback counts own multicast messages not delivered because
	// loopback is off (blocked by the device, or filtered by the conn).
	Loopback uint64
	// Dropped counts datagrams lost before the caller could read them, by
	// reason. The keys are the Drop* constants: DropOverflow and
	// DropWCError on every backend, and the software backend's reasons
	// for packets bad on the wire (DropBadICRC, DropBadQKey, ...). A
	// reason with nothing counted is absent.
	//
	// On rdma-core no device tells a QP what it dropped: DropDeviceOverflow
	// is the port's count, shared by every conn on it, since this conn
	// was opened: mlx5's out_of_buffer, or on rxe rcvd_pkts minus
	// rdma_recvs (packets that completed no receive). A multicast packet
	// that several QPs of the port receive counts once in rcvd_pkts and
	// once per QP in rdma_recvs, which hides as much loss: there, the
	// count is a lower bound. Which conn lost them cannot be known.
	Dropped map[string]uint64
	// SendErrors counts datagrams the kernel or the device refused to
	// send, whether the write returned the error itself or it was known
	// only later (and returned by the next write); SendFailed splits it
	// by reason.
	SendErrors uint64
	// SendFailed counts the failed sends of SendErrors by reason: the
	// keys are the SendErr* constants. A reason with nothing counted is
	// absent.
	SendFailed map[string]uint64
	// Rejoins counts group rejoins after MULTICAST_ERROR events.
	Rejoins uint64
	// Recoveries counts QP resets after the QP went to the error state
	// (a link flap under a sending conn does that): see ErrLinkDown.
	Recoveries uint64
	// Device holds the growth, since the conn was opened, of its
	// device's counters where the backend can read them. On rdma-core
	// they are the port's sysfs hw_counters (rxe's rcvd_pkts and
	// rdma_recvs, mlx5's out_of_buffer), shared by every QP on the port;
	// on the software backend the UDP MIB of the conn's network namespace
	// under nstat's names (UdpRcvbufErrors: datagrams the kernel dropped
	// for a full socket buffer, UdpInErrors, UdpInDatagrams, ...), shared
	// by every socket in the namespace. They are not this conn's. Nil
	// where there are none, and after Close.
	Device map[string]uint64
}

// Drop reasons: the keys of Stats.Dropped. The providers count under the
// same strings (internal/verbs), so these are defined from theirs.
const (
	// DropOverflow counts datagrams that found no receive buffer posted
	// in time (the receiver fell behind): the receive queue, or on the
	// software backend the socket buffer, overflowed.
	DropOverflow = verbs.DropOverflow
	// DropWCError counts receives that completed with an error status.
	DropWCError = verbs.DropWCError
	// DropTruncated through DropTooLong are the software backend's
	// reasons for packets bad on the wire.
	DropTruncated = verbs.DropTruncated // shorter than its headers and ICRC
	DropBadTVer   = verbs.DropBadTVer   // BTH TVer not 0
	DropBadOpcode = verbs.DropBadOpcode // not UD SEND_ONLY[/WITH_IMMEDIATE]
	DropBadPKey   = verbs.DropBadPKey   // P_Key neither 0xFFFF nor 0x7FFF
	DropBadQKey   = verbs.DropBadQKey   // DETH Q_Key not the conn's
	DropBadICRC   = verbs.DropBadICRC   // ICRC does not match
	DropBadPad    = verbs.DropBadPad    // PadCnt longer than the payload
	DropNotForUs  = verbs.DropNotForUs  // dest QPN not ours, or a group not joined
	DropTooLong   = verbs.DropTooLong   // longer than the posted receive buffer
	// DropQPReset counts datagrams received but discarded when the conn
	// reset its QP after a QP error (see ErrQPError).
	DropQPReset = "qp-reset"
	// DropDeviceOverflow (rdma-core) is the port's count of messages that
	// found no receive posted, since the conn opened; shared by every QP
	// on the port (see Stats.Dropped).
	DropDeviceOverflow = verbs.DropDeviceOverflow
)

// DropReasons lists every key Stats.Dropped can have.
var DropReasons = []string{
	DropOverflow, DropWCError, DropTruncated, DropBadTVer, DropBadOpcode,
	DropBadPKey, DropBadQKey, DropBadICRC, DropBadPad, DropNotForUs, DropTooLong,
	DropQPReset, DropDeviceOverflow,
}

// Send error reasons: the keys of Stats.SendFailed. The errno names are
// what the kernel returned for the datagram on the software backend.
const (
	SendErrMessageTooLong  = "message-too-long"    // EMSGSIZE: longer than the route's MTU
	SendErrNetUnreachable  = "network-unreachable" // ENETUNREACH: no route
	SendErrHostUnreachable = "host-unreachable"    // EHOSTUNREACH; ETIMEDOUT from address resolution
	SendErrNotPermitted    = "not-permitted"       // EPERM, EACCES: a firewall refused it
	SendErrNoBuffers       = "no-buffers"          // ENOBUFS: the kernel dropped it (qdisc full)
	SendErrCompletion      = "completion-error"    // an error completion from the device
	SendErrOther           = "other"               // any other errno
)

// SendErrorReasons lists every key Stats.SendFailed can have.
var SendErrorReasons = []string{
	SendErrMessageTooLong, SendErrNetUnreachable, SendErrHostUnreachable,
	SendErrNotPermitted, SendErrNoBuffers, SendErrCompletion, SendErrOther,
}

// sendReason indexes counters.sendFailed in the order of SendErrorReasons.
type sendReason int

const (
	reasonMessageTooLong sendReason = iota
	reasonNetUnreachable
	reasonHostUnreachable
	reasonNotPermitted
	reasonNoBuffers
	reasonCompletion
	reasonOther
	numSendReasons
)

// sendReasonOf says why a send failed: by its errno, or an error
// completion without one.
func sendReasonOf(errno sysErrno) sendReason {
	switch errno {
	case 0:
		return reasonCompletion
	case errEMSGSIZE:
		return reasonMessageTooLong
	case errENETUNREACH:
		return reasonNetUnreachable
	case errEHOSTUNREACH, errETIMEDOUT: // ETIMEDOUT: no neighbour answered (ibv_create_ah on RoCE)
		return reasonHostUnreachable
	case errEPERM, errEACCES:
		return reasonNotPermitted
	case errENOBUFS:
		return reasonNoBuffers
	}
	return reasonOther
}

// kernelSendErrno is the errno of a send the kernel refused: err wraps an
// *os.SyscallError (sendto, sendmmsg, or the connect of an address
// handle's route lookup) with an errno. ok is false for any other error.
func kernelSendErrno(err error) (sysErrno, bool) {
	var se *os.SyscallError
	var errno sysErrno
	if errors.As(err, &se) && errors.As(se.Err, &errno) && errno != 0 {
		return errno, true
	}
	return 0, false
}

type counters struct {
	sent, received, truncated, loopback uint64
	wcErrors, sendErrors, rejoins       uint64
	recoveries, resetDrops              uint64
	sentRegistered, sentCopied          uint64
	sendFailed                          [numSendReasons]uint64
}

// countSendError counts one failed send under reason r.
func (c *Conn) countSendError(r sendReason) {
	atomic.AddUint64(&c.ctr.sendErrors, 1)
	atomic.AddUint64(&c.ctr.sendFailed[r], 1)
}

// Stats returns a snapshot of the conn's counters. After Close it returns
// the counters as they stood at Close.
func (c *Conn) Stats() Stats {
	s := Stats{
		Sent:           atomic.LoadUint64(&c.ctr.sent),
		SentRegistered: atomic.LoadUint64(&c.ctr.sentRegistered),
		SentCopied:     atomic.LoadUint64(&c.ctr.sentCopied),
		Received:       atomic.LoadUint64(&c.ctr.received),
		Truncated:      atomic.LoadUint64(&c.ctr.truncated),
		Loopback:       atomic.LoadUint64(&c.ctr.loopback),
		SendErrors:     atomic.LoadUint64(&c.ctr.sendErrors),
		Rejoins:        atomic.LoadUint64(&c.ctr.rejoins),
		Recoveries:     atomic.LoadUint64(&c.ctr.recoveries),
		Dropped:        map[string]uint64{},
		SendFailed:     map[string]uint64{},
	}
	for r := range c.ctr.sendFailed {
		if n := atomic.LoadUint64(&c.ctr.sendFailed[r]); n > 0 {
			s.SendFailed[SendErrorReasons[r]] = n
		}
	}
	if n := atomic.LoadUint64(&c.ctr.wcErrors); n > 0 {
		s.Dropped[DropWCError] = n
	}
	if n := atomic.LoadUint64(&c.ctr.resetDrops); n > 0 {
		s.Dropped[DropQPReset] = n
	}
	if !c.closed.Load() {
		s.Device = c.qp.DeviceCounts()
	}
	for k, v := range c.qpDropCounts() {
		switch {
		case v == 0:
		case k == verbs.DropOwnLoopback:
			// Blocked by the device on request: not a loss.
			s.Loopback += v
		default:
			s.Dropped[k] += v
		}
	}
	return s
}
