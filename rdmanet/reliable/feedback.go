package reliable

import (
	"math"
	"time"
)

// Feedback: when a receiver asks for what it missed. The decisions are
// pure functions of a clock reading and a random draw, so that the
// receiver (naks.go) and the virtual-clock simulation
// (feedback_sim_test.go) run the same code.
//
// Every receiver that lost a multicast datagram finds the gap at about the
// same time, and none hears another's NAK (they go to the sender by
// unicast). What keeps NAKs per loss O(1) is the sender's multicast
// repair, which reaches them all and cancels every NAK still waiting
// (PGM's NCF): the first NAK must go out about a round trip before the
// others. A truncated exponential back-off does that for any group size
// (RFC 5401 section 5; Nonnenmacher and Biersack, IEEE/ACM ToN 7(3)
// 1999): the delay t on [0, T] has the density e^(λt/T), λ = ln(N)+1,
// so that among N receivers a few draw early and the rest late, and
// T = backoffK · (ln(N)+1) · srtt. With the +1 the first of N draws
// comes at about the same number of round trips whatever N, so the
// time to repair does not grow with the group. N comes from the sender, which counts the
// receivers it hears and advertises ceil(log2 N) in every data and
// heartbeat datagram (NORM's GSIZE); a lone receiver (N = 1) NAKs at once.

const (
	// backoffK scales the back-off bound: T = backoffK · (ln(N)+1) ·
	// srtt. The simulation's table (TestFeedbackSimulation) and real runs
	// at 4 and 64 receivers chose it: NAKs per loss <= 3 at 10,000
	// receivers, repair time at 64 receivers within twice that at 4.
	backoffK = 3.0
	// maxBackoff bounds T and the retry delay: a forged group size only
	// slows its receiver down, this far at most. The round trip may be
	// long: 64 receivers sharing two loaded cores in one process measured
	// 2-57 ms, and with T and retries capped at 10 ms every receiver
	// asked once a loss, as before the back-off (130 NAKs a loss).
	maxBackoff = time.Second
	// maxGSize is the largest group-size code (4 bits): 2^15 receivers.
	maxGSize = 15
	// flagsGSize is where data and heartbeat datagrams carry the code,
	// byte 1 bits 4-7.
	flagsGSize = 0xf0
	gsizeShift = 4
)

// gsizeCode is the advertised group size for n live receivers:
// ceil(log2 n), 0 for at most one, at most maxGSize.
func gsizeCode(n int) uint8 {
	c := uint8(0)
	for c < maxGSize && 1<<c < n {
		c++
	}
	return c
}

// backoffBound returns T, the bound of the first NAK's random delay, for a
// sender advertising group-size code g and a smoothed round trip srtt; a
// fixed bound (Config.NAKDelay) replaces backoffK · (ln(N)+1) · srtt. A
// lone receiver (g = 0) has no one to wait for: T = 0.
func backoffBound(g uint8, srtt, fixed int64) int64 {
	if fixed > 0 {
		return fixed
	}
	if g == 0 {
		return 0
	}
	g = min(g, maxGSize)
	srtt = min(max(srtt, int64(minRTT)), int64(maxBackoff))
	t := backoffK * (float64(g)*math.Ln2 + 1) * float64(srtt)
	return min(int64(t), int64(maxBackoff))
}

// backoffDelay maps a uniform draw u in [0, 1) to a delay on [0, T]
// with density proportional to e^(λt/T), λ = ln(N)+1 (RFC 5401 5.1):
// t = T/λ · ln(1 + u(e^λ - 1)).
func backoffDelay(u float64, g uint8, srtt, fixed int64) int64 {
	T := backoffBound(g, srtt, fixed)
	if T <= 0 {
		return 0
	}
	lambda := float64(min(g, maxGSize))*math.Ln2 + 1
	d := float64(T) / lambda * math.Log1p(u*math.Expm1(lambda))
	return min(max(int64(d), 0), T)
}

// retryDelay is how long a NAK waits for its repair before it is sent
// again: the larger of twice the round trip and the round trip plus four
// mean deviations (RFC 6298), plus a fresh back-off draw (so that the
// receivers that lost a repair do not all ask again at once), doubling
// with each try (tries >= 1), from minRTO to maxRTO, or to the round
// trip's own bound (up to maxBackoff) where the path is slower.
func retryDelay(srtt, rttvar int64, tries int, backoff int64) int64 {
	base := max(2*srtt, srtt+4*rttvar)
	rto := base + backoff
	rto <<= min(max(tries-1, 0), 8)
	return min(max(rto, int64(minRTO)), max(int64(maxRTO), min(base+backoff, int64(maxBackoff))))
}

// rttSample folds one round-trip sample into a smoothed round trip and
// its mean deviation (RFC 6298; rttvar 0: no sample yet).
func rttSample(srtt, rttvar, sample int64) (int64, int64) {
	sample = max(sample, int64(minRTT))
	if rttvar == 0 {
		return sample, sample / 2
	}
	d := srtt - sample
	if d < 0 {
		d = -d
	}
	rttvar += (d - rttvar) / 4
	srtt += (sample - srtt) / 8
	return srtt, rttvar
}

// rttUnasked folds the time a round's gaps took to fill, took, into the
// round trip of a receiver that has measured none (rttvar 0) and did not
// ask this round: someone else's NAK brought the repair, so took is the
// first asker's back-off plus its round trip, more than a round trip.
// Until its own first NAK is answered, a receiver takes the shortest such
// time (not below initial) as its round trip: a receiver started at a
// round trip shorter than the path's would otherwise NAK too early, every
// loss, until it had asked once itself.
func rttUnasked(srtt, rttvar, took, initial int64) int64 {
	if rttvar != 0 {
		return srtt
	}
	if srtt == initial {
		return max(initial, took)
	}
	return max(initial, min(srtt, took))
}

// nakState is where a receiver's NAK timer for one sender stands.
type nakState uint8

const (
	nakIdle    nakState = iota // nothing missing
	nakBackoff                 // a gap was seen; the first NAK waits for due
	nakWaiting                 // NAKed; asked again at due unless repaired
)

// uniform draws from [0, 1): *rand.Rand.
type uniform interface{ Float64() float64 }

// backoff is what a receiver's delays depend on: the sender's advertised
// group-size code, the round trip to it and Config.NAKDelay.
type backoff struct {
	g            uint8
	srtt, rttvar int64
	fixed        int64
	rng          uniform
}

func (b *backoff) draw() int64 {
	return backoffDelay(b.rng.Float64(), b.g, b.srtt, b.fixed)
}

// nakTimer is a receiver's NAK state machine for one sender. A round
// starts when a gap is seen and covers every gap below end; it ends when
// none below end is missing (a repair came, whoever asked for it), and a
// gap seen meanwhile past end starts the next round then. Times are the
// conn's clock (ns).
//
//	idle --gap--> backoff --due: NAK--> waiting --due: NAK again--> waiting
//	backoff, waiting --nothing missing below end--> idle (or the next round)
type nakTimer struct {
	state   nakState
	due     int64  // backoff, waiting: when to NAK
	seen    int64  // when the round's first gap was seen
	end     uint64 // the round is over when nothing below end is missing
	later   int64  // when a gap at or past end was first seen in this round; 0: none
	tries   int    // NAKs sent this round
	late    bool   // the first NAK's back-off was drawn again (late)
	held    bool   // a NAK due waited for unread input (naks.go, recv.go: tick)
	lastAt  int64  // when the last NAK went
	echo    uint16 // the transmission number it echoed
	sentAt  int64  // when the round's first NAK went, for the round trip; 0: none
	sentSeq uint64 // the first seq that NAK asked for
}

// gap notes that datagrams below high are missing (the first at contig)
// at now; it reports whether a new round started (due moved).
func (t *nakTimer) gap(now int64, high uint64, b *backoff) bool {
	if t.state != nakIdle {
		if high > t.end && t.later == 0 {
			t.later = now
		}
		return false
	}
	*t = nakTimer{state: nakBackoff, seen: now, end: high, due: now + b.draw()}
	return true
}

// progress looks at the first missing seq, contig (high when none is):
// when nothing below end is missing the round is over, and it returns
// true with how long the round's gaps took to fill (from the first seen).
// A next round then starts at once for what is still missing, its
// back-off counted from now: every receiver hears the repair that ended
// the round at about the same time, as it saw the gap.
func (t *nakTimer) progress(now int64, contig, high uint64, b *backoff) (took int64, done bool) {
	if t.state == nakIdle || contig < t.end {
		return 0, false
	}
	took = now - t.seen
	later := t.later
	*t = nakTimer{}
	if contig < high {
		if later == 0 {
			later = now
		}
		*t = nakTimer{state: nakBackoff, seen: later, end: high, due: now + b.draw()}
	}
	return took, true
}

// late reports whether a first NAK due now comes too late to send: the
// receiver looks at it more than T after it was due, as when its process
// stalled (a loaded machine: tens of ms). Every receiver in that process
// finds its NAK due at once then, before any repair could come: instead
// the back-off is drawn again from now, once a round.
func (t *nakTimer) lateDraw(now int64, b *backoff) bool {
	T := backoffBound(b.g, b.srtt, b.fixed)
	if t.state != nakBackoff || t.late || T <= 0 || now-t.due <= T {
		return false
	}
	t.late = true
	t.due = now + b.draw()
	return true
}

// hold reports whether a retry due now should wait instead: the receiver
// has heard nothing from the sender since its last NAK (heard, the last
// transmission number, is the one that NAK echoed). The sender does not
// answer a NAK that echoes a number older than its last repair of what it
// asks for (the repair is on its way), so such a retry helps only when
// the last NAK was lost: it waits until maxRTO (or four round trips, when
// longer) after that NAK. A process
// that stalls (a loaded machine: tens of ms) finds every retry due at
// once, with nothing new heard. A receiver that heard a later number
// and still misses the datagram lost the repair, and asks at once.
func (t *nakTimer) hold(now int64, heard uint16, b *backoff) bool {
	wait := min(max(int64(maxRTO), 4*b.srtt), int64(maxBackoff))
	if t.state != nakWaiting || heard != t.echo || now-t.lastAt >= wait {
		return false
	}
	t.due = t.lastAt + wait
	return true
}

// fired notes the NAKs sent at now, echoing transmission number echo,
// for the round's missing datagrams from first on (asked false: nothing
// was missing, the timer stops) and sets the retry.
func (t *nakTimer) fired(now int64, asked bool, first uint64, echo uint16, b *backoff) {
	if !asked {
		*t = nakTimer{}
		return
	}
	t.lastAt, t.echo = now, echo
	if t.tries == 0 {
		t.sentAt, t.sentSeq = now, first
	}
	t.tries++
	t.state = nakWaiting
	t.due = now + retryDelay(b.srtt, b.rttvar, t.tries, b.draw())
}

// repaired reports whether a repair of seq, heard at now, answers the
// round's first NAK, sent once: then it returns the round-trip sample
// and forgets it, one sample a round. A NAK sent again gives none
// (Karn's rule): which try the repair answers is not known, and a sample
// from the first try would carry the retry delay, which carries a
// back-off of up to T, itself a multiple of the round trip: the estimate
// would feed on itself (it did: 16 receivers at 1% loss went from 50 µs
// to 250 ms).
func (t *nakTimer) repaired(now int64, seq uint64) (int64, bool) {
	if t.sentAt == 0 || seq != t.sentSeq {
		return 0, false
	}
	s := now - t.sentAt
	t.sentAt = 0
	return s, t.tries == 1
}
