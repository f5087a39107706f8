package main

// Tracker follows the message numbers of one sender session and says what
// UD multicast did to them: which were lost, which arrived twice, which
// arrived late (after a later one, or after a heartbeat said they were
// sent).
//
// A sender numbers its msgs 1, 2, 3, ... and puts the number of its last
// msg in every other datagram, so a loss shows either at the next msg
// ("expected 5, got 7: 2 lost") or at the next heartbeat ("has sent 7, the
// last I got is 5: 2 lost").
//
// A restarted sender is a new session and gets a new Tracker: its numbers
// start again at 1 without looking like duplicates. What a sender sent
// before we first heard of it is not counted as lost: we were not there.
// Numbers are 32 bits and do not wrap in any chat's lifetime.
type Tracker struct {
	started bool
	highest uint32 // the highest msg number known to have been sent
	// seen has bit i set when msg highest-i arrived (or predates the
	// tracker): a window of 64 for duplicates and late arrivals.
	seen uint64

	Received uint64 // msgs delivered
	Lost     uint64 // msgs known sent that never arrived (late ones taken back)
	Dups     uint64 // msgs suppressed as duplicates
	Late     uint64 // msgs that arrived after their loss was counted
}

const window = 64

// Msg records the arrival of msg seq. It returns how many msgs this
// arrival shows to be lost (those numbered between the highest known and
// seq), and whether to show the msg: false for a duplicate.
func (t *Tracker) Msg(seq uint32) (lost uint32, deliver bool) {
	if !t.started {
		t.started, t.highest, t.seen = true, seq, ^uint64(0)
		t.Received++
		return 0, true
	}
	if seq > t.highest {
		lost = t.advance(seq) - 1 // all between, not seq itself
		t.seen |= 1
		t.Lost += uint64(lost)
		t.Received++
		return lost, true
	}
	d := t.highest - seq
	if d >= window || t.seen&(1<<d) != 0 {
		t.Dups++
		return 0, false
	}
	// Counted lost when a later number showed up; it was only late.
	t.seen |= 1 << d
	t.Lost--
	t.Late++
	t.Received++
	return 0, true
}

// Sent records that the sender says it has sent msgs up to seq (a hello,
// heartbeat or bye). It returns how many msgs that shows to be lost.
func (t *Tracker) Sent(seq uint32) (lost uint32) {
	if !t.started {
		t.started, t.highest, t.seen = true, seq, ^uint64(0)
		return 0
	}
	if seq <= t.highest {
		return 0
	}
	lost = t.advance(seq)
	t.Lost += uint64(lost)
	return lost
}

// advance moves highest to seq, marking the numbers after the old highest
// up to seq missing, and returns how many that is.
func (t *Tracker) advance(seq uint32) uint32 {
	n := seq - t.highest
	if n >= window {
		t.seen = 0
	} else {
		t.seen <<= n
	}
	t.highest = seq
	return n
}
