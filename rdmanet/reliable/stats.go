package reliable

import (
	"sync/atomic"
	"time"
)

// Stats counts what a reliable conn did. Counters only grow; one that
// would wrap stays at the largest uint64.
//
// Every datagram a receiver drops is counted under one reason:
// Malformed, Foreign, Own, Unauthenticated, Replayed, Duplicates,
// Overruns, SendersRefused, TooLong, Implausible or Unsolicited.
type Stats struct {
	MessagesSent     uint64 // messages written
	BytesSent        uint64 // their payload bytes
	DatagramsSent    uint64 // data datagrams sent the first time
	MessagesReceived uint64 // messages returned by ReadFrom
	BytesReceived    uint64 // their payload bytes
	Truncated        uint64 // messages longer than the read buffer

	NAKsSent          uint64 // NAK datagrams sent (one per missing run)
	NAKsReceived      uint64 // NAK datagrams received by this sender
	RepairsMulticast  uint64 // datagrams resent to the group
	RepairsUnicast    uint64 // datagrams resent to one receiver
	RepairsSuppressed uint64 // NAKed datagrams not resent: the NAK was sent before their repair could arrive
	LostSent          uint64 // "lost" answers: a NAK asked for what left the window
	// RepairsDeferred counts NAKed datagrams not resent at once: their
	// last send from the window had not completed (the device may still
	// read the slot), so the NAK waits for the receiver to ask again.
	RepairsDeferred uint64
	// WindowWaits counts writes of a window slot that waited for the
	// slot's last send to complete before overwriting it.
	WindowWaits uint64

	Recovered      uint64 // data datagrams this receiver missed and got from a repair
	Duplicates     uint64 // data datagrams received twice (repairs others asked for)
	LossesReported uint64 // *LossError values returned by ReadFrom
	MessagesLost   uint64 // messages they named
	Overruns       uint64 // datagrams dropped: beyond RecvWindow (asked for again)

	FlowControlWaits  uint64 // writes that waited for the slowest receiver
	Heartbeats        uint64 // heartbeats sent
	StatusSent        uint64 // status messages sent
	SendersTimedOut   uint64 // senders forgotten after SenderTimeout
	ReceiversTimedOut uint64 // receivers forgotten after ReceiverTimeout
	Malformed         uint64 // datagrams that failed to decode, dropped
	Foreign           uint64 // well-formed datagrams not for this conn, dropped

	// RTT is the largest smoothed round trip (NAK to repair) among the
	// senders this conn receives from (InitialRTT until one is measured).
	RTT time.Duration

	// RepairBytes counts the bytes of the repairs sent (datagrams as
	// sent, header included).
	RepairBytes uint64
	// RepairsRateLimited counts NAKed datagrams not resent because the
	// repair credit (Config.RepairShare) was spent, or the NAK did not
	// pay for them (a NAK buys eight times its length in repairs; see
	// the package doc's Repair): the receiver asks again later.
	RepairsRateLimited uint64
	// GapsFilled counts this receiver's NAK rounds that ended with every
	// gap they covered filled (by a repair, whoever asked for it, or by a
	// loss report); RepairDelay is the mean and RepairDelayMax the
	// longest time from such a round's first gap being seen to that.
	GapsFilled     uint64
	RepairDelay    time.Duration
	RepairDelayMax time.Duration
	// NAKsHeld counts NAK rounds whose NAK, when due, waited because the
	// conn had received datagrams it had not read yet (which may hold
	// the repair, or what the NAK would ask for): it went once they were
	// read, if still needed.
	NAKsHeld uint64

	// Unauthenticated counts datagrams dropped by a keyed conn (Config.Key)
	// because their tag was wrong or missing; Replayed, those whose
	// transmit counter it had seen from that QP and session, or too old
	// to tell. Nothing else looked at them.
	Unauthenticated uint64
	Replayed        uint64

	// SendersRefused counts datagrams of senders not tracked, dropped
	// because MaxSenders were tracked and none was idle to evict. Such a
	// sender is remembered (up to 4 MaxSenders of them, at least 64) and,
	// once admitted, starts at its first datagram refused: what it sent
	// meanwhile is repaired, or reported lost, never skipped.
	SendersRefused uint64
	// SendersEvicted counts idle senders forgotten to admit a new one
	// (nothing unread, no gap, no NAK pending; the least recently heard
	// first); one heard again resumes where it was.
	SendersEvicted uint64
	// SendersForgotten counts senders whose place was forgotten: more
	// senders were refused or evicted than this conn remembers (4
	// MaxSenders, at least 64; those only ever refused go first). One
	// heard again starts where it is heard, and what it sent while not
	// tracked is neither delivered nor reported lost: nonzero means such
	// a loss may have happened. Many non-members on the group cause it;
	// a keyed group (Config.Key) keeps them out.
	SendersForgotten uint64
	// TooLong counts data datagrams of messages with more fragments
	// than this conn's MaxMessage allows: they are not reassembled, and
	// the message is reported lost at its place (a *LossError).
	TooLong uint64
	// Implausible counts datagrams dropped for numbers no sender sends:
	// a message number that grows faster than the seq (each message
	// takes a datagram at least), a fragment of a message that starts
	// before the next one to read, a window start past the position.
	Implausible uint64
	// Unsolicited counts "lost" answers ignored: from a sender not
	// tracked, or while no NAK of this receiver to it was outstanding.
	Unsolicited uint64
	// Own counts datagrams that carry this conn's own QP and session
	// (its multicast looped back, or forged), dropped.
	Own uint64

	// Senders is how many senders this conn tracks now (at most
	// MaxSenders), and RecvWindowBytes what their receive windows take
	// now: a window grows with what it must keep, up to RecvWindow
	// datagrams, and is freed when empty and unused for SenderTimeout.
	Senders         int
	RecvWindowBytes uint64
}

type counters struct {
	messagesSent, bytesSent, datagramsSent        atomic.Uint64
	messagesReceived, bytesReceived, truncated    atomic.Uint64
	naksSent, naksReceived                        atomic.Uint64
	repairsMulticast, repairsUnicast, suppressed  atomic.Uint64
	lostSent, duplicates, lossesReported, msgLost atomic.Uint64
	recovered                                     atomic.Uint64
	overruns, fcWaits, heartbeats, statusSent     atomic.Uint64
	sendersTimedOut, receiversTimedOut            atomic.Uint64
	malformed, foreign                            atomic.Uint64
	repairsDeferred, windowWaits                  atomic.Uint64
	direct                                        atomic.Uint64 // messages delivered by deliverDirect (tests)
	repairBytes, rateLimited                      atomic.Uint64
	gapsFilled, repairDelaySum, repairDelayMax    atomic.Uint64 // ns
	unauthenticated, replayed                     atomic.Uint64
	sendersRefused, sendersEvicted, tooLong       atomic.Uint64
	implausible, unsolicited, own                 atomic.Uint64
	naksHeld, sendersForgotten                    atomic.Uint64
}

// satAddCounter adds n to a, staying at the largest uint64 rather than
// wrapping.
func satAddCounter(a *atomic.Uint64, n uint64) {
	for {
		old := a.Load()
		if a.CompareAndSwap(old, satAdd(old, n)) {
			return
		}
	}
}

// Stats returns a snapshot of the conn's counters.
func (c *Conn) Stats() Stats {
	st := c.counters()
	st.RTT = c.rcv.maxRTT()
	st.Senders, st.RecvWindowBytes = c.rcv.windows()
	return st
}

// counters returns the counters that take no lock.
func (c *Conn) counters() Stats {
	s := &c.stats
	st := Stats{
		MessagesSent: s.messagesSent.Load(), BytesSent: s.bytesSent.Load(),
		DatagramsSent:    s.datagramsSent.Load(),
		MessagesReceived: s.messagesReceived.Load(), BytesReceived: s.bytesReceived.Load(),
		Truncated: s.truncated.Load(),
		NAKsSent:  s.naksSent.Load(), NAKsReceived: s.naksReceived.Load(),
		RepairsMulticast: s.repairsMulticast.Load(), RepairsUnicast: s.repairsUnicast.Load(),
		RepairsSuppressed: s.suppressed.Load(), LostSent: s.lostSent.Load(),
		RepairsDeferred: s.repairsDeferred.Load(), WindowWaits: s.windowWaits.Load(),
		Recovered:  s.recovered.Load(),
		Duplicates: s.duplicates.Load(), LossesReported: s.lossesReported.Load(),
		MessagesLost: s.msgLost.Load(), Overruns: s.overruns.Load(),
		FlowControlWaits: s.fcWaits.Load(), Heartbeats: s.heartbeats.Load(),
		StatusSent:      s.statusSent.Load(),
		SendersTimedOut: s.sendersTimedOut.Load(), ReceiversTimedOut: s.receiversTimedOut.Load(),
		Malformed: s.malformed.Load(), Foreign: s.foreign.Load(),
	}
	st.SendersRefused, st.SendersEvicted = s.sendersRefused.Load(), s.sendersEvicted.Load()
	st.SendersForgotten = s.sendersForgotten.Load()
	st.TooLong, st.Implausible = s.tooLong.Load(), s.implausible.Load()
	st.Unsolicited, st.Own = s.unsolicited.Load(), s.own.Load()
	st.RepairBytes, st.RepairsRateLimited = s.repairBytes.Load(), s.rateLimited.Load()
	st.GapsFilled, st.NAKsHeld = s.gapsFilled.Load(), s.naksHeld.Load()
	if st.GapsFilled > 0 {
		st.RepairDelay = time.Duration(s.repairDelaySum.Load() / st.GapsFilled)
	}
	st.RepairDelayMax = time.Duration(s.repairDelayMax.Load())
	st.Unauthenticated, st.Replayed = s.unauthenticated.Load(), s.replayed.Load()
	return st
}
