package soft

import "github.com/go-rdma/rdmanet/internal/verbs"

// Drops are a QP's counters of datagrams dropped, by reason.
type Drops struct {
	Truncated uint64 // shorter than BTH+DETH+ICRC
	BadTVer   uint64
	BadOpcode uint64 // not UD SEND_ONLY[/WITH_IMMEDIATE]
	BadPKey   uint64
	BadQKey   uint64
	BadICRC   uint64
	BadPad    uint64
	NotForUs  uint64 // dest QPN not ours, or a group not joined
	TooLong   uint64 // larger than the posted receive buffer
	Self      uint64 // own multicast looped back (BlockSelfMulticastLoopback)
	// Overflow counts datagrams the kernel dropped because the socket
	// buffer was full: they found no posted receive for too long
	// (SO_RXQ_OVFL, learnt when the next datagram is read).
	Overflow uint64
	// SendDropped counts sends the kernel dropped (ENOBUFS/EAGAIN).
	SendDropped uint64
}

// Drops returns the QP's drop counters.
func (q *QP) Drops() Drops {
	return Drops{
		Truncated:   q.drops[DropTruncated].Load(),
		BadTVer:     q.drops[DropBadTVer].Load(),
		BadOpcode:   q.drops[DropBadOpcode].Load(),
		BadPKey:     q.drops[DropBadPKey].Load(),
		BadQKey:     q.drops[DropBadQKey].Load(),
		BadICRC:     q.drops[DropBadICRC].Load(),
		BadPad:      q.drops[DropBadPad].Load(),
		NotForUs:    q.drops[DropNotForUs].Load(),
		TooLong:     q.drops[DropTooLong].Load(),
		Self:        q.drops[DropSelf].Load(),
		Overflow:    q.overflow.Load(),
		SendDropped: q.sendDropped.Load(),
	}
}

// DropCounts implements verbs.DropCounter: the counters by reason name.
func (q *QP) DropCounts() map[string]uint64 {
	m := make(map[string]uint64, numDropReasons+2)
	for r := DropTruncated; r < numDropReasons; r++ {
		m[r.String()] = q.drops[r].Load()
	}
	m["receive queue overflow"] = q.overflow.Load()
	m["send dropped"] = q.sendDropped.Load()
	return m
}

// DropsOf returns the drop counters of a software QP; ok is false for a
// QP of another provider.
func DropsOf(qp verbs.QP) (d Drops, ok bool) {
	sq, ok := qp.(*QP)
	if !ok {
		return Drops{}, false
	}
	return sq.Drops(), true
}
