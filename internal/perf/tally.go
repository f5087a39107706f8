package perf

import (
	"math"
	"math/bits"
	"slices"
	"time"
)

// Percentile returns the p-th percentile (0 < p <= 100) of sorted by the
// nearest-rank method: the smallest value with at least p% of the values
// at or below it. It returns 0 for an empty slice.
func Percentile(sorted []int64, p float64) int64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	// Nearest rank, with a little slack so that p=99.9 of 1000 values
	// is rank 999 and not 1000 because of float rounding.
	rank := int(math.Ceil(p/100*float64(n) - 1e-9))
	rank = max(1, min(rank, n))
	return sorted[rank-1]
}

// Summary is what a sorted list of latencies boils down to.
type Summary struct {
	Min, Mean, P50, P90, P99, P999, Max int64
}

// Summarize returns the summary of sorted (zero for an empty slice).
func Summarize(sorted []int64) Summary {
	if len(sorted) == 0 {
		return Summary{}
	}
	var sum float64
	for _, v := range sorted {
		sum += float64(v)
	}
	return Summary{
		Min:  sorted[0],
		Mean: int64(sum / float64(len(sorted))),
		P50:  Percentile(sorted, 50),
		P90:  Percentile(sorted, 90),
		P99:  Percentile(sorted, 99),
		P999: Percentile(sorted, 99.9),
		Max:  sorted[len(sorted)-1],
	}
}

// Sorted returns a sorted copy of v.
func Sorted(v []int64) []int64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s
}

// Bucket is one bucket of a log-scaled histogram: values in [LoNs, HiNs).
type Bucket struct {
	LoNs  int64 `json:"lo_ns"`
	HiNs  int64 `json:"hi_ns"`
	Count int   `json:"count"`
}

// Histogram buckets sorted values by powers of two, from the bucket of
// the smallest value to the bucket of the largest, empty buckets between
// them included: [2^k, 2^(k+1)) ns. Values <= 0 go into [0, 1). It
// returns nil for an empty slice.
func Histogram(sorted []int64) []Bucket {
	if len(sorted) == 0 {
		return nil
	}
	bucket := func(v int64) int { // index k of [2^k, 2^(k+1)); -1 for v <= 0
		if v <= 0 {
			return -1
		}
		return bits.Len64(uint64(v)) - 1
	}
	lo, hi := bucket(sorted[0]), bucket(sorted[len(sorted)-1])
	hs := make([]Bucket, 0, hi-lo+1)
	for k := lo; k <= hi; k++ {
		b := Bucket{}
		if k >= 0 {
			b.LoNs = int64(1) << k
			b.HiNs = int64(1) << (k + 1)
		} else {
			b.HiNs = 1
		}
		hs = append(hs, b)
	}
	for _, v := range sorted {
		hs[bucket(v)-lo].Count++
	}
	return hs
}

// Median returns the median of v (the mean of the middle two for an even
// count), 0 for none. v is left as it is.
func Median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Rate returns n a second over el, 0 for el <= 0.
func Rate(n uint64, el time.Duration) float64 {
	if el <= 0 {
		return 0
	}
	return float64(n) / el.Seconds()
}

// Gbit returns the payload bit rate, in Gbit/s, of msgsPerS messages of
// size bytes a second.
func Gbit(msgsPerS float64, size int) float64 { return msgsPerS * float64(size*8) / 1e9 }

// LossPct returns the share, in percent, of expected messages that were
// not received: 0 when nothing was expected, and never below 0 (more
// received than expected, duplicates or another sender's, counts as none
// lost).
func LossPct(expected, received uint64) float64 {
	if expected == 0 {
		return 0
	}
	got := min(received, expected)
	return 100 * float64(expected-got) / float64(expected)
}

// Expected is how many messages a receiver that saw no sender count
// should have had: the larger of the count a marker carried and the
// highest sequence number seen plus one.
func (t *RxTally) Expected() uint64 { return max(t.Total, t.MaxSeq1) }
