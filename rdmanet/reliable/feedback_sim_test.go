package reliable

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The feedback simulation: the receivers' back-off and NAK timers
// (feedback.go) driven by a virtual clock over a modelled path, for
// groups too large to run: one sender, N receivers, each at its own
// one-way delay from the sender, drawn from a log-normal spread. Each trial
// loses one data datagram, for every receiver at once (correlated, as
// one drop on a shared link or at the sender) or for each with
// probability p (independent); the next datagram shows the gap, NAKs
// and repairs are lost at the same rate, and the sender answers as
// repair.go does: a NAK that echoes a transmission number older than the
// last repair's, or that comes within RepairLinger of it, is not
// answered (the repair is on its way). A receiver that lost the repair
// hears a later transmission number with the next datagram. Round trips
// are learnt by each receiver from its own NAKs, from InitialRTT, across
// the trials (as naks.go does).

type simModel struct {
	n          int
	correlated bool    // every receiver loses the datagram (and a repair)
	p          float64 // independent: each receiver loses it with p; NAKs and repairs are lost with p in both models
	trials     int
	warmup     int           // trials run first and not counted: receivers learn their round trips
	initialRTT time.Duration // Config.InitialRTT; 0: its default, simInitialRTT
	oneWay     time.Duration // median one-way delay; 0: simBaseOneWay
}

type simResult struct {
	losses           int // trials in which some receiver lost the datagram
	naks, repairs    int
	lost             int     // receivers that never got the repair in the trial's time
	p50, p99, meanRT float64 // time from gap seen to repair, in the receiver's own round trips
}

const (
	simBaseOneWay = 100 * time.Microsecond          // median one-way delay
	simSpread     = 0.5                             // sigma of ln(one-way delay)
	simInterval   = 20 * time.Microsecond           // between data datagrams
	simSenderProc = 5 * time.Microsecond            // the sender's time to answer a NAK
	simLinger     = 20 * time.Microsecond           // RepairLinger
	simHorizon    = 2 * time.Second                 // a trial ends by then
	simInitialRTT = 200 * time.Microsecond          // Config.InitialRTT's default
	simPathRTT    = 2*simBaseOneWay + simSenderProc // the median round trip
)

type simEvent struct {
	at   int64
	kind uint8 // simGap, simFire, simNAK, simRepair, simEpoch
	r    int   // receiver
	arg  int64
}

const (
	simGap    = iota // the datagram after the lost one reaches r: the gap is seen
	simFire          // r's NAK timer may be due (arg: the due it was set for)
	simNAK           // r's NAK reaches the sender (arg: the epoch it echoes)
	simRepair        // a repair reaches r (arg: its epoch)
	simEpoch         // r hears epoch arg (data after a repair)
)

// simQueue is a binary min-heap of events by time (container/heap would
// box each event).
type simQueue []simEvent

func (q *simQueue) push(e simEvent) {
	*q = append(*q, e)
	h := *q
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if h[p].at <= h[i].at {
			break
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
}

func (q *simQueue) pop() simEvent {
	h := *q
	e := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < n && h[l].at < h[m].at {
			m = l
		}
		if l+1 < n && h[l+1].at < h[m].at {
			m = l + 1
		}
		if m == i {
			break
		}
		h[m], h[i] = h[i], h[m]
		i = m
	}
	*q = h
	return e
}

type simReceiver struct {
	oneWay  int64
	timer   nakTimer
	srtt    int64
	rttvar  int64
	missing bool
	heard   int64 // the last epoch heard (echoed in NAKs)
	seen    int64
}

func simulate(m simModel, seed uint64) simResult {
	rng := rand.New(rand.NewPCG(seed, 7))
	initial := int64(simInitialRTT)
	if m.initialRTT > 0 {
		initial = int64(m.initialRTT)
	}
	oneWay := simBaseOneWay
	if m.oneWay > 0 {
		oneWay = m.oneWay
	}
	rs := make([]simReceiver, m.n)
	for i := range rs {
		d := float64(oneWay) * math.Exp(simSpread*rng.NormFloat64())
		rs[i] = simReceiver{oneWay: int64(d), srtt: initial}
	}
	g := gsizeCode(m.n)
	var res simResult
	var times []float64
	var q simQueue
	lose := func() bool { return rng.Float64() < m.p }
	bo := func(r *simReceiver) *backoff {
		return &backoff{g: g, srtt: r.srtt, rttvar: r.rttvar, rng: rng}
	}
	var warm simResult // the counts at the end of the warm-up
	for trial := range m.warmup + m.trials {
		if trial == m.warmup {
			warm, times = res, times[:0]
		}
		any := false
		for i := range rs {
			r := &rs[i]
			r.missing = m.correlated || lose()
			r.heard, r.timer = 0, nakTimer{}
			if r.missing {
				any = true
				q.push(simEvent{at: int64(simInterval) + r.oneWay, kind: simGap, r: i})
			}
		}
		if !any {
			continue
		}
		res.losses++
		epoch, repairAt := int64(0), int64(0)
		for len(q) > 0 {
			e := q.pop()
			if e.at > int64(simHorizon) {
				q = q[:0]
				break
			}
			r := &rs[e.r]
			now := e.at
			switch e.kind {
			case simGap:
				r.seen = now
				if r.timer.gap(now, 1, bo(r)) {
					q.push(simEvent{at: r.timer.due, kind: simFire, r: e.r, arg: r.timer.due})
				}
			case simFire:
				if r.timer.state == nakIdle || r.timer.due != e.arg {
					continue
				}
				if r.timer.lateDraw(now, bo(r)) || r.timer.hold(now, uint16(r.heard), bo(r)) {
					q.push(simEvent{at: r.timer.due, kind: simFire, r: e.r, arg: r.timer.due})
					continue
				}
				res.naks++
				if !lose() {
					q.push(simEvent{at: now + r.oneWay, kind: simNAK, r: e.r, arg: r.heard})
				}
				r.timer.fired(now, true, 0, uint16(r.heard), bo(r))
				q.push(simEvent{at: r.timer.due, kind: simFire, r: e.r, arg: r.timer.due})
			case simNAK:
				if epoch > 0 && (e.arg < epoch || now-repairAt < int64(simLinger)) {
					continue // the last repair is on its way to that receiver
				}
				epoch++
				repairAt = now + int64(simSenderProc)
				res.repairs++
				lostAll := m.correlated && lose()
				for i := range rs {
					if !(lostAll || (!m.correlated && lose())) {
						q.push(simEvent{at: repairAt + rs[i].oneWay, kind: simRepair, r: i, arg: epoch})
					}
					q.push(simEvent{at: repairAt + int64(simInterval) + rs[i].oneWay, kind: simEpoch, r: i, arg: epoch})
				}
			case simRepair:
				r.heard = max(r.heard, e.arg)
				if !r.missing {
					continue
				}
				r.missing = false
				if s, ok := r.timer.repaired(now, 0); ok {
					r.srtt, r.rttvar = rttSample(r.srtt, r.rttvar, s)
				}
				asked := r.timer.tries > 0
				if took, ok := r.timer.progress(now, 1, 1, bo(r)); ok && !asked {
					r.srtt = rttUnasked(r.srtt, r.rttvar, took, initial)
				}
				rtt := float64(2*r.oneWay + int64(simSenderProc))
				times = append(times, float64(now-r.seen)/rtt)
			case simEpoch:
				r.heard = max(r.heard, e.arg)
			}
		}
		for i := range rs {
			if rs[i].missing {
				res.lost++
			}
		}
	}
	res.losses -= warm.losses
	res.naks -= warm.naks
	res.repairs -= warm.repairs
	res.lost -= warm.lost
	slices.Sort(times)
	if len(times) > 0 {
		res.p50 = times[len(times)/2]
		res.p99 = times[min(len(times)-1, len(times)*99/100)]
		sum := 0.0
		for _, x := range times {
			sum += x
		}
		res.meanRT = sum / float64(len(times))
	}
	return res
}

// TestFeedbackSimulation: NAKs per lost datagram stay O(1) from 1 to
// 10,000 receivers, each lost datagram is repaired about once, and the
// time to repair grows with ln N at most.
//
// Independent loss at 10,000 receivers is the hard case for a cold start:
// a receiver learns its round trip only from rounds it takes part in,
// about one in a hundred at 1% independent loss, so in the first hundred
// or so rounds most receivers back off from InitialRTT. The default
// (200 µs) keeps NAKs per loss under 3 on paths up to twice as slow (a
// 410 µs round trip); an InitialRTT a quarter of the path's round trip
// costs about 4 NAKs per loss over those first rounds, and under 3 once the
// receivers have taken part in one (the warmed-up row).
func TestFeedbackSimulation(t *testing.T) {
	type row struct {
		m       simModel
		maxNAKs float64
	}
	trials := func(n int) int { return max(40, 100000/n) }
	if raceEnabled || testing.Short() {
		trials = func(n int) int { return max(20, 20000/n) }
	}
	var rows []row
	for _, n := range []int{1, 4, 16, 64, 1000, 10000} {
		rows = append(rows, row{simModel{n: n, correlated: true, p: 0.01, trials: trials(n)}, 3})
	}
	// Each of the N·p receivers that lost the datagram misses the repair
	// with p too: repairs per loss grow towards 2 when N·p·p nears 1
	// (about 1.6 at 10,000).
	for _, n := range []int{64, 1000, 10000} {
		rows = append(rows, row{simModel{n: n, p: 0.01, trials: trials(n) * 3}, 3})
	}
	slow := 2 * simBaseOneWay // a path twice as slow: InitialRTT half its round trip
	quarter := simPathRTT / 4 // InitialRTT a quarter of the path's round trip
	rows = append(rows,
		row{simModel{n: 10000, p: 0.01, trials: trials(10000) * 3, oneWay: slow}, 3},
		row{simModel{n: 10000, p: 0.01, trials: trials(10000) * 3, initialRTT: quarter}, 5},
		row{simModel{n: 10000, p: 0.01, trials: trials(10000) * 3, warmup: 500, initialRTT: quarter}, 3},
	)
	t.Logf("%6s %-12s %-8s %-6s %6s %7s %8s %11s %7s %7s %7s", "N", "loss", "initRTT", "path", "warmup", "trials", "NAKs/loss", "repairs/loss", "p50 RTT", "p99 RTT", "unrepaired")
	for _, rw := range rows {
		res := simulate(rw.m, uint64(rw.m.n))
		model := "correlated"
		if !rw.m.correlated {
			model = "independent"
		}
		initial := rw.m.initialRTT
		if initial == 0 {
			initial = simInitialRTT
		}
		path := simPathRTT
		if rw.m.oneWay > 0 {
			path = 2*rw.m.oneWay + simSenderProc
		}
		nl := float64(res.naks) / float64(res.losses)
		rl := float64(res.repairs) / float64(res.losses)
		t.Logf("%6d %-12s %-8v %-6v %6d %7d %8.2f %11.2f %7.2f %7.2f %7d", rw.m.n, fmt.Sprintf("%s %g%%", model, rw.m.p*100), initial, path, rw.m.warmup, res.losses, nl, rl, res.p50, res.p99, res.lost)
		if nl > rw.maxNAKs {
			t.Errorf("N=%d %s, InitialRTT %v, path %v, warm-up %d: %.2f NAKs per lost datagram, want <= %g", rw.m.n, model, initial, path, rw.m.warmup, nl, rw.maxNAKs)
		}
		if res.lost > 0 {
			t.Errorf("N=%d %s, InitialRTT %v, path %v: %d receivers never repaired", rw.m.n, model, initial, path, res.lost)
		}
	}
}
