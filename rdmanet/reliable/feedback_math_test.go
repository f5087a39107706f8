package reliable

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The receivers' feedback arithmetic (feedback.go), checked value by
// value against what its doc comments and RFC 6298 / RFC 5401 say: the
// group-size code, the back-off bound and draw, the retry timeout, the
// round-trip estimate, and the NAK timer's transitions at their
// boundaries. The simulation (feedback_sim_test.go) and the loss tests
// check that these work together; these pin each one, so that a
// constant or a comparison moved by one is seen here.

func TestGsizeCode(t *testing.T) {
	// ceil(log2 n), 0 for at most one, at most maxGSize.
	for _, c := range []struct {
		n    int
		want uint8
	}{
		{-1, 0}, {0, 0}, {1, 0}, {2, 1}, {3, 2}, {4, 2}, {5, 3}, {8, 3}, {9, 4},
		{1 << 14, 14}, {1<<14 + 1, 15}, {1 << 15, 15}, {1<<15 + 1, 15}, {1 << 30, 15},
	} {
		require.Equal(t, c.want, gsizeCode(c.n), "gsizeCode(%d)", c.n)
	}
}

func TestBackoffBound(t *testing.T) {
	ms := int64(time.Millisecond)
	want := func(g int, srtt int64) int64 { return int64(3 * (float64(g)*math.Ln2 + 1) * float64(srtt)) }
	for _, c := range []struct {
		g           uint8
		srtt, fixed int64
		want        int64
	}{
		{0, ms, 0, 0}, // one receiver: no back-off
		{1, ms, 0, want(1, ms)},
		{3, ms, 0, want(3, ms)},
		{15, 10 * int64(time.Microsecond), 0, want(15, 10*int64(time.Microsecond))},
		{16, 10 * int64(time.Microsecond), 0, want(15, 10*int64(time.Microsecond))}, // at most maxGSize
		{1, 1, 0, want(1, int64(minRTT))},                                           // srtt at least minRTT
		{1, int64(minRTT) - 1, 0, want(1, int64(minRTT))},                           //
		{1, int64(minRTT) + 1, 0, want(1, int64(minRTT)+1)},                         //
		{1, 2 * int64(time.Second), 0, int64(time.Second)},                          // at most maxBackoff
		{1, 150 * ms, 0, want(1, 150*ms)},                                           // 762 ms: under the bound
		{2, 150 * ms, 0, int64(time.Second)},                                        // 1.07 s: at the bound
		{4, ms, 7 * ms, 7 * ms},                                                     // NAKDelay replaces it
		{0, ms, 1, 1},                                                               //
	} {
		require.Equal(t, c.want, backoffBound(c.g, c.srtt, c.fixed), "backoffBound(%d, %d, %d)", c.g, c.srtt, c.fixed)
	}
}

func TestBackoffDelay(t *testing.T) {
	const T = int64(time.Millisecond)
	// t = T/λ · ln(1 + u(e^λ - 1)), λ = g·ln 2 + 1.
	want := func(u float64, g int) int64 {
		l := float64(g)*math.Ln2 + 1
		return int64(float64(T) / l * math.Log1p(u*math.Expm1(l)))
	}
	for _, g := range []uint8{0, 1, 4, 15, 20} {
		gg := int(min(g, maxGSize))
		require.Zero(t, backoffDelay(0, g, 0, T), "u=0, g=%d", g)
		for _, u := range []float64{0.1, 0.5, 0.9} {
			require.Equal(t, want(u, gg), backoffDelay(u, g, 0, T), "u=%v, g=%d", u, g)
		}
		require.LessOrEqual(t, backoffDelay(math.Nextafter(1, 0), g, 0, T), T, "u→1, g=%d", g)
		require.InDelta(t, T, backoffDelay(1, g, 0, T), 1, "u=1, g=%d", g)
	}
	// No bound, no delay: one receiver, no NAKDelay.
	require.Zero(t, backoffDelay(0.5, 0, int64(time.Millisecond), 0))
	// A bound of 1 ns: the delay is 0 or 1.
	require.LessOrEqual(t, backoffDelay(0.99, 1, 0, 1), int64(1))
}

func TestRetryDelay(t *testing.T) {
	us, ms := int64(time.Microsecond), int64(time.Millisecond)
	for _, c := range []struct {
		name          string
		srtt, rttvar  int64
		tries         int
		backoff, want int64
	}{
		{"twice the round trip", ms, 100 * us, 1, 0, 2 * ms},
		{"round trip plus four deviations", ms, ms, 1, 0, 5 * ms},
		{"exactly both", ms, 250 * us, 1, 0, 2 * ms},
		{"plus the back-off", ms, 0, 1, 3 * ms, 5 * ms},
		{"tries 0 as 1", ms, 0, 0, 0, 2 * ms},
		{"doubled once", ms, 0, 2, 0, 4 * ms},
		{"doubled twice", ms, 0, 3, 0, 8 * ms},
		{"at most maxRTO", ms, 0, 4, 0, 10 * ms},
		{"at least minRTO", 5 * us, 0, 1, 0, 50 * us},
		{"just over minRTO", 26 * us, 0, 1, 0, 52 * us},
		{"doubling stops at 8", 5 * us, 0, 9, 0, 10 * us << 8},
		{"doubling stops at 8, later tries", 5 * us, 0, 30, 0, 10 * us << 8},
		{"seven doublings", 5 * us, 0, 8, 0, 10 * us << 7},
		{"slow path: its own bound", 100 * ms, 10 * ms, 1, 50 * ms, 250 * ms},
		{"slow path: not doubled past it", 100 * ms, 10 * ms, 2, 50 * ms, 250 * ms},
		{"slow path: at most maxBackoff", 800 * ms, 0, 1, 0, int64(time.Second)},
	} {
		require.Equal(t, c.want, retryDelay(c.srtt, c.rttvar, c.tries, c.backoff), "%s: retryDelay(%d, %d, %d, %d)", c.name, c.srtt, c.rttvar, c.tries, c.backoff)
	}
}

func TestRTTSample(t *testing.T) {
	us := int64(time.Microsecond)
	type est struct{ srtt, rttvar int64 }
	for _, c := range []struct {
		name         string
		srtt, rttvar int64
		sample       int64
		want         est
	}{
		{"first: rttvar half of it", 0, 0, 100 * us, est{100 * us, 50 * us}},
		{"first: at least minRTT", 0, 0, 1 * us, est{5 * us, 2500}},
		{"first: minRTT exactly", 0, 0, 5 * us, est{5 * us, 2500}},
		{"slower: 1/8 and 1/4", 100 * us, 50 * us, 180 * us, est{110 * us, 57500}},
		{"faster: |d|", 100 * us, 50 * us, 20 * us, est{90 * us, 57500}},
		{"same: rttvar shrinks", 100 * us, 40 * us, 100 * us, est{100 * us, 30 * us}},
		{"later: at least minRTT", 100 * us, 50 * us, 0, est{100*us - (95*us)/8, 50*us + (95*us-50*us)/4}},
	} {
		s, v := rttSample(c.srtt, c.rttvar, c.sample)
		require.Equal(t, c.want, est{s, v}, "%s: rttSample(%d, %d, %d)", c.name, c.srtt, c.rttvar, c.sample)
	}
}

func TestRTTUnasked(t *testing.T) {
	us := int64(time.Microsecond)
	init := 50 * us
	require.Equal(t, 80*us, rttUnasked(80*us, 10*us, 20*us, init), "measured: kept")
	require.Equal(t, 300*us, rttUnasked(init, 0, 300*us, init), "at InitialRTT: took")
	require.Equal(t, init, rttUnasked(init, 0, 20*us, init), "at InitialRTT: not below it")
	require.Equal(t, 200*us, rttUnasked(300*us, 0, 200*us, init), "the shortest")
	require.Equal(t, 300*us, rttUnasked(300*us, 0, 400*us, init), "the shortest, kept")
	require.Equal(t, init, rttUnasked(300*us, 0, 10*us, init), "the shortest, not below initial")
}

// fixedDraw is a uniform that always returns u.
type fixedDraw float64

func (u fixedDraw) Float64() float64 { return float64(u) }

func TestNAKTimerRound(t *testing.T) {
	b := backoff{fixed: 1000, rng: fixedDraw(0.5)}
	d := b.draw()
	require.Positive(t, d)
	var n nakTimer

	// A gap starts a round; a later one, past its end, is noted once.
	require.True(t, n.gap(100, 10, &b))
	require.Equal(t, nakTimer{state: nakBackoff, seen: 100, end: 10, due: 100 + d}, n)
	require.False(t, n.gap(150, 10, &b), "no new round while one runs")
	require.Zero(t, n.later, "a gap below the round's end is not a later one")
	require.False(t, n.gap(200, 12, &b))
	require.Equal(t, int64(200), n.later)
	require.False(t, n.gap(250, 14, &b))
	require.Equal(t, int64(200), n.later, "the first later gap's time is kept")

	// Not filled below end: the round goes on.
	took, done := n.progress(300, 9, 14, &b)
	require.False(t, done)
	require.Zero(t, took)

	// The first NAK: a retry is set, the round trip is timed from it.
	n.fired(400, true, 3, 7, &b)
	require.Equal(t, nakWaiting, n.state)
	require.Equal(t, 1, n.tries)
	require.Equal(t, int64(400), n.sentAt)
	require.Equal(t, uint64(3), n.sentSeq)
	require.Equal(t, uint16(7), n.echo)
	require.Equal(t, int64(400)+retryDelay(0, 0, 1, d), n.due)

	// A repair of another seq gives no sample; of the asked one, one.
	_, ok := n.repaired(500, 4)
	require.False(t, ok)
	s, ok := n.repaired(520, 3)
	require.True(t, ok)
	require.Equal(t, int64(120), s)
	_, ok = n.repaired(530, 3)
	require.False(t, ok, "one sample a round")

	// Filled exactly to end: over; what was seen later starts the next
	// round, timed from when it was seen.
	took, done = n.progress(600, 10, 14, &b)
	require.True(t, done)
	require.Equal(t, int64(500), took)
	require.Equal(t, nakTimer{state: nakBackoff, seen: 200, end: 14, due: 600 + d}, n)

	// Over with nothing missing: idle.
	took, done = n.progress(700, 14, 14, &b)
	require.True(t, done)
	require.Equal(t, int64(500), took)
	require.Equal(t, nakTimer{}, n)
	_, done = n.progress(800, 14, 14, &b)
	require.False(t, done, "an idle timer has no round to end")

	// A round whose later gaps came with none seen: the next round is
	// timed from now.
	n.gap(1000, 5, &b)
	took, done = n.progress(1100, 5, 8, &b)
	require.True(t, done)
	require.Equal(t, int64(100), took)
	require.Equal(t, int64(1100), n.seen)
}

func TestNAKTimerRetries(t *testing.T) {
	b := backoff{srtt: int64(time.Millisecond), fixed: 1000, rng: fixedDraw(0)}
	var n nakTimer
	n.gap(0, 5, &b)
	n.fired(10, true, 1, 3, &b)
	n.fired(20, true, 1, 4, &b)
	require.Equal(t, 2, n.tries)
	require.Equal(t, int64(10), n.sentAt, "the round trip is timed from the first NAK")
	require.Equal(t, int64(20)+retryDelay(b.srtt, 0, 2, 0), n.due)
	s, ok := n.repaired(30, 1)
	require.False(t, ok, "Karn: no sample after a retry")
	require.Equal(t, int64(20), s)

	// Nothing missing when it fired: the timer stops.
	n.fired(40, false, 0, 5, &b)
	require.Equal(t, nakTimer{}, n)
}

func TestNAKTimerLateDraw(t *testing.T) {
	const T = 500
	b := backoff{fixed: T, rng: fixedDraw(0.5)}
	d := b.draw()
	start := func() nakTimer {
		var n nakTimer
		n.gap(0, 5, &b)
		return n
	}
	n := start()
	due := n.due
	require.False(t, n.lateDraw(due+T, &b), "exactly T late: sent")
	require.Equal(t, due, n.due)
	require.True(t, n.lateDraw(due+T+1, &b), "more than T late: drawn again")
	require.Equal(t, due+T+1+d, n.due)
	require.False(t, n.lateDraw(n.due+T+1, &b), "once a round")

	// Not in back-off: a retry is never drawn again.
	n = start()
	n.fired(1, true, 0, 0, &b)
	require.False(t, n.lateDraw(n.due+T+1, &b))

	// A bound of 1 ns: 2 ns late is late.
	b1 := backoff{fixed: 1, rng: fixedDraw(0.5)}
	var m nakTimer
	m.gap(0, 5, &b1)
	require.True(t, m.lateDraw(m.due+2, &b1))

	// No bound (one receiver, no NAKDelay): never late.
	b0 := backoff{rng: fixedDraw(0.5)}
	m = nakTimer{}
	m.gap(0, 5, &b0)
	require.False(t, m.lateDraw(m.due+int64(time.Hour), &b0))
}

func TestNAKTimerHold(t *testing.T) {
	for _, c := range []struct {
		srtt int64
		wait time.Duration
	}{
		{int64(time.Millisecond), maxRTO},                    // maxRTO
		{int64(5 * time.Millisecond), 20 * time.Millisecond}, // four round trips
		{int64(time.Second), time.Second},                    // at most maxBackoff
	} {
		b := backoff{srtt: c.srtt, fixed: 1000, rng: fixedDraw(0)}
		var n nakTimer
		n.gap(0, 5, &b)
		require.False(t, n.hold(10, 9, &b), "in back-off: not held")
		n.fired(100, true, 1, 9, &b)
		w := int64(c.wait)
		require.True(t, n.hold(100+w-1, 9, &b), "srtt %d: nothing heard, before the wait", c.srtt)
		require.Equal(t, 100+w, n.due)
		require.False(t, n.hold(100+w, 9, &b), "srtt %d: nothing heard, the wait over", c.srtt)
		require.False(t, n.hold(101, 10, &b), "srtt %d: a later transmission heard: ask at once", c.srtt)
	}
}
