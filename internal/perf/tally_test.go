package perf

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func seqNs(n int) []int64 {
	s := make([]int64, n)
	for i := range s {
		s[i] = int64(i + 1)
	}
	return s
}

// Nearest rank: p99 of 1..1000 is 990 (the index len*99/100 gives 991),
// p99.9 is 999, not rounded up to 1000 by float error.
func TestPercentile(t *testing.T) {
	for _, tc := range []struct {
		in   []int64
		p    float64
		want int64
	}{
		{seqNs(100), 1, 1}, {seqNs(100), 50, 50}, {seqNs(100), 90, 90}, {seqNs(100), 99, 99},
		{seqNs(100), 99.9, 100}, {seqNs(100), 100, 100},
		{seqNs(1000), 50, 500}, {seqNs(1000), 99, 990}, {seqNs(1000), 99.9, 999},
		{[]int64{7}, 50, 7}, {[]int64{7}, 99.9, 7}, {nil, 50, 0},
		// Two values: p50 is the lower one, anything above it the upper.
		{[]int64{10, 20}, 50, 10}, {[]int64{10, 20}, 51, 20},
	} {
		assert.Equal(t, tc.want, Percentile(tc.in, tc.p), "p%v of %d values", tc.p, len(tc.in))
	}
}

func TestSummarize(t *testing.T) {
	assert.Equal(t, Summary{Min: 1, Mean: 500, P50: 500, P90: 900, P99: 990, P999: 999, Max: 1000}, Summarize(seqNs(1000)))
	assert.Equal(t, Summary{}, Summarize(nil))
	// One outlier moves max and mean, not the median.
	sum := Summarize(append(seqNs(999), 1_000_000))
	assert.Equal(t, int64(500), sum.P50)
	assert.Equal(t, int64(1_000_000), sum.Max)
	assert.Equal(t, int64(999), sum.P999)
	assert.Greater(t, sum.Mean, int64(1400))
}

func TestSorted(t *testing.T) {
	in := []int64{3, 1, 2}
	assert.Equal(t, []int64{1, 2, 3}, Sorted(in))
	assert.Equal(t, []int64{3, 1, 2}, in, "the input is left alone")
}

func TestHistogram(t *testing.T) {
	hs := Histogram([]int64{1, 2, 3, 4, 1000, 1023, 1024})
	require.Len(t, hs, 11) // [1,2) ... [1024,2048)
	want := map[int64]int{1: 1, 2: 2, 4: 1, 512: 2, 1024: 1}
	total := 0
	for i, b := range hs {
		assert.Equal(t, int64(1)<<i, b.LoNs)
		assert.Equal(t, 2*b.LoNs, b.HiNs)
		assert.Equal(t, want[b.LoNs], b.Count, "bucket [%d,%d)", b.LoNs, b.HiNs)
		total += b.Count
	}
	assert.Equal(t, 7, total)

	// It starts at the smallest value's bucket, not at 1 ns.
	hs = Histogram([]int64{10_000, 12_000, 40_000})
	require.Len(t, hs, 3)
	assert.Equal(t, int64(8192), hs[0].LoNs)
	assert.Equal(t, []int{2, 0, 1}, []int{hs[0].Count, hs[1].Count, hs[2].Count})

	hs = Histogram([]int64{0, 1})
	require.Len(t, hs, 2)
	assert.Equal(t, Bucket{LoNs: 0, HiNs: 1, Count: 1}, hs[0])
	assert.Nil(t, Histogram(nil))
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}, {[]float64{1.1, 0.9}, 1}} {
		assert.InDelta(t, tc.want, Median(tc.in), 1e-12, "%v", tc.in)
	}
	in := []float64{3, 1, 2}
	Median(in)
	assert.Equal(t, []float64{3, 1, 2}, in, "the input is left alone")
}

func TestLossPct(t *testing.T) {
	for _, tc := range []struct {
		exp, got uint64
		want     float64
	}{{0, 0, 0}, {0, 5, 0}, {100, 100, 0}, {100, 90, 10}, {100, 0, 100}, {100, 150, 0}, {3, 2, 100.0 / 3}} {
		assert.InDelta(t, tc.want, LossPct(tc.exp, tc.got), 1e-9, "expected %d, received %d", tc.exp, tc.got)
	}
}

func TestRateAndGbit(t *testing.T) {
	assert.Equal(t, 2000.0, Rate(1000, 500*time.Millisecond))
	assert.Equal(t, 0.0, Rate(1000, 0))
	assert.Equal(t, 0.0, Rate(1000, -time.Second))
	assert.InDelta(t, 8.192, Gbit(1e6, 1024), 1e-9, "1M msgs/s of 1 KiB")
}

func TestExpected(t *testing.T) {
	for _, tc := range []struct {
		total, maxSeq1, want uint64
	}{{0, 0, 0}, {10, 0, 10}, {0, 7, 7}, {10, 7, 10}, {5, 9, 9}} {
		tl := RxTally{Total: tc.total, MaxSeq1: tc.maxSeq1}
		assert.Equal(t, tc.want, tl.Expected(), "marker %d, highest seq+1 %d", tc.total, tc.maxSeq1)
	}
}
