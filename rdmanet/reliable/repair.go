// A sender's answers to NAKs: repairs from its window, each datagram at
// most once a RepairInterval, within the repair credit (RepairShare).

package reliable

import (
	"time"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// nak answers a receiver's NAK for count datagrams from h.seq: what is in
// the window is resent, to the group (or to the receiver), unless it was
// resent within RepairInterval, the last repair of it may still be on its
// way to that receiver (inFlight), or the repair credit is spent
// (repairCredit: the receiver asks again).
// What left the window is answered with a "lost" datagram naming where
// the window starts.
//
// A NAK pays for what it asks: the repairs it causes total at most paid
// bytes (nakPays times its length; wire.go), and what they do not cover
// is left for the receiver to ask again (RepairsRateLimited).
func (s *sender) nak(from rdmanet.Addr, h *header, count uint32, rtt int64, paid int) {
	c := s.c
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return
	}
	now := c.now()
	s.touch(from, h.session, now, 0, 0, false)
	start, end := h.seq, min(h.seq+min(uint64(count), s.wi.n), s.next)
	lowSeq, lowMsg := s.low()
	if start < lowSeq {
		lh := header{kind: kindLost, session: c.session, seq: lowSeq, msg: lowMsg}
		putHeader(s.lostBuf[:], &lh)
		s.ctrl[0] = rdmanet.Message{Buffer: s.lostBuf[:c.seal(&s.seal, s.lostBuf[:], headerLen)], Addr: from}
		c.conn.WriteBatch(s.ctrl[:])
		c.stats.lostSent.Add(1)
		start = lowSeq
	}
	to := c.group
	if c.cfg.UnicastRepair {
		to = from
	}
	k, repaired := 0, false
	flush := func() {
		if k == 0 {
			return
		}
		n, _ := c.conn.WriteBatch(s.msgs[:k])
		s.sent(n)
		for _, m := range s.msgs[:n] {
			c.stats.repairBytes.Add(uint64(len(m.Buffer)))
		}
		if c.cfg.UnicastRepair {
			c.stats.repairsUnicast.Add(uint64(n))
		} else {
			c.stats.repairsMulticast.Add(uint64(n))
		}
		k = 0
	}
	linger := min(max(2*rtt, int64(c.cfg.RepairLinger)), int64(maxRTO))
	for seq := start; seq < end; seq++ {
		i := s.wi.of(seq)
		if s.seqs[i] != seq || s.lens[i] == 0 {
			continue
		}
		if s.lens[i] > paid || !s.repair.covers(s.lens[i], now) {
			// Looked at first: a NAK stream past the credit costs the
			// sender one look a NAK, not one a datagram asked for.
			c.stats.rateLimited.Add(end - seq)
			break
		}
		if t := s.repairT[i]; t != 0 && (now-t < int64(c.cfg.RepairInterval) || s.inFlight(i, now-t, h.tx, linger)) {
			c.stats.suppressed.Add(1)
			continue
		}
		if !s.settled(int(i)) {
			// Its header is not rewritten under the device: the send
			// is on its way, and a receiver that lacks it asks again.
			c.stats.repairsDeferred.Add(1)
			continue
		}
		s.repair.spend(s.lens[i])
		paid -= s.lens[i]
		s.repairT[i] = now
		if c.sendHook != nil {
			c.sendHook(seq, true, now)
		}
		d := s.slot(seq)
		markRepair(d)
		if !s.starting(0, now) {
			// Past the start, a repair of a datagram sent in it must not
			// start a receiver that first hears it at seq 0.
			endStart(d)
		}
		if !c.cfg.UnicastRepair {
			setTx(d, s.tx)
			s.repairTx[i] = s.tx
			s.tx++
		}
		c.seal(&s.seal, d, s.lens[i]-c.cfg.trailer()) // a new counter and tag
		s.msgs[k] = rdmanet.Message{Buffer: d[:s.lens[i]], Addr: to}
		s.msgSlot[k] = int(i)
		if k++; k == len(s.msgs) {
			flush()
		}
		repaired = true
	}
	flush()
	if repaired && !c.cfg.UnicastRepair && s.hbEvery > int64(c.cfg.HeartbeatInterval) {
		// An idle sender announces itself soon after a repair: a
		// receiver that lost the repair hears a later transmission
		// number, and its next NAK is answered (inFlight).
		s.hbEvery = int64(c.cfg.HeartbeatInterval)
		c.kickTimers()
	}
}

// inFlight reports whether the last repair of slot i, age ago, may still
// be on its way to the receiver whose NAK echoes transmission number echo
// (the last it heard from this sender to the group). A multicast repair
// was sent before every later transmission, on the same path: a receiver
// that had not heard the repair's number when it sent the NAK (echo
// before it) asked before the repair could arrive, and the repair serves
// it; one that had heard a later number and still asks lost the repair,
// and is answered. The serial comparison holds while the repair is among
// the last 32768 transmissions; an older one is repaired again. No time
// bound is needed: a receiver behind its receive queue may take long to
// hear the repair, and one that lost it hears a later number soon (the
// next data, or the heartbeat an idle sender sends after a repair). A
// unicast repair serves one receiver, and is held for linger (two of the
// asking receiver's round trips, at least RepairLinger). Within
// RepairLinger every NAK is held.
func (s *sender) inFlight(i uint64, age int64, echo uint16, linger int64) bool {
	c := s.c
	switch {
	case age < int64(c.cfg.RepairLinger):
		return true
	case c.cfg.UnicastRepair:
		return age < linger
	}
	return s.tx-s.repairTx[i] < 1<<15 && int16(echo-s.repairTx[i]) < 0
}

// repairBurst is the most repair credit a sender holds: 256 KiB repairs
// 485 datagrams of a 512 B message, or 63 of 4 KiB, at once. (128 KiB
// was too little for a FlowMin sender, which earns nothing while it waits
// for a receiver that waits for repairs: TestRepairGaps's receiver that
// loses 40 datagrams of 3 KiB in a row took 5 ms a repair round, its
// sender rate-limited 495 times.)
const repairBurst = 256 << 10

// repairCredit bounds what repairs cost a sender, whatever NAKs ask: each
// byte of a first send earns share bytes of credit, up to burst, and an
// idle sender's credit refills to burst over a second (so that a receiver
// that lost the last datagrams is repaired even when nothing follows
// them). A repair is sent only when the credit covers it. A NAK is a few
// dozen bytes and may ask for a whole window: without the bound, a
// spoofed NAK stream makes the sender multicast a window per NAK.
type repairCredit struct {
	share    float64 // credit per byte sent; < 0: no bound
	burst    float64
	credit   float64
	refillAt int64 // the clock of the last refill
}

func (r *repairCredit) init(share float64, burst int) {
	r.share, r.burst, r.credit = share, float64(burst), float64(burst)
}

// earn adds the credit of a first send of n bytes.
func (r *repairCredit) earn(n int) {
	if r.share > 0 {
		r.credit = min(r.credit+r.share*float64(n), r.burst)
	}
}

// covers refills the credit to now and reports whether it covers a
// repair of n bytes.
func (r *repairCredit) covers(n int, now int64) bool {
	if r.share < 0 {
		return true
	}
	if dt := now - r.refillAt; dt > 0 {
		r.credit = min(r.credit+r.burst*float64(dt)/float64(time.Second), r.burst)
		r.refillAt = now
	}
	return r.credit >= float64(n)
}

// spend takes the credit of a repair of n bytes, which covers said it
// covers.
func (r *repairCredit) spend(n int) {
	if r.share >= 0 {
		r.credit -= float64(n)
	}
}
