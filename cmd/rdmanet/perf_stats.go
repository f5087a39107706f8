//go:build linux

package main

import (
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
	"strings"
)

// percentile returns the p-th percentile (0 < p <= 100) of sorted by the
// nearest-rank method: the smallest value with at least p% of the values
// at or below it. It returns 0 for an empty slice.
func percentile(sorted []int64, p float64) int64 {
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

// latencySummary is what a sorted list of latencies boils down to.
type latencySummary struct {
	Min, Mean, P50, P90, P99, P999, Max int64
}

func summarize(sorted []int64) latencySummary {
	if len(sorted) == 0 {
		return latencySummary{}
	}
	var sum float64
	for _, v := range sorted {
		sum += float64(v)
	}
	return latencySummary{
		Min:  sorted[0],
		Mean: int64(sum / float64(len(sorted))),
		P50:  percentile(sorted, 50),
		P90:  percentile(sorted, 90),
		P99:  percentile(sorted, 99),
		P999: percentile(sorted, 99.9),
		Max:  sorted[len(sorted)-1],
	}
}

// histBucket is one bucket of a log-scaled histogram: values in [Lo, Hi).
type histBucket struct {
	LoNs  int64 `json:"lo_ns"`
	HiNs  int64 `json:"hi_ns"`
	Count int   `json:"count"`
}

// histogram buckets sorted values by powers of two, from the bucket of the
// smallest value to the bucket of the largest, empty buckets between them
// included: [2^k, 2^(k+1)) ns. Values <= 0 go into [0, 1).
func histogram(sorted []int64) []histBucket {
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
	hs := make([]histBucket, 0, hi-lo+1)
	for k := lo; k <= hi; k++ {
		b := histBucket{}
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

// writeHistogram prints buckets as text bars, width characters for the
// fullest bucket, with each bucket's count and cumulative share.
func writeHistogram(w io.Writer, hs []histBucket, width int) {
	total, most := 0, 0
	for _, b := range hs {
		total += b.Count
		most = max(most, b.Count)
	}
	if total == 0 {
		return
	}
	t := newTable(w)
	cum := 0
	for _, b := range hs {
		cum += b.Count
		bar := 0
		if b.Count > 0 {
			bar = max(1, int(math.Round(float64(b.Count)*float64(width)/float64(most))))
		}
		fmt.Fprintf(t, "  %s - %s\t|%s%s|\t%d\t%.2f%%\n", fmtDur(b.LoNs), fmtDur(b.HiNs),
			strings.Repeat("#", bar), strings.Repeat(" ", width-bar), b.Count, 100*float64(cum)/float64(total))
	}
	t.Flush()
}

// fmtDur prints nanoseconds with three significant digits and a unit.
func fmtDur(ns int64) string {
	d := float64(ns)
	switch {
	case ns < 1000:
		return fmt.Sprintf("%dns", ns)
	case ns < 1e6:
		return sig3(d/1e3) + "µs"
	case ns < 1e9:
		return sig3(d/1e6) + "ms"
	}
	return sig3(d/1e9) + "s"
}

func sig3(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// fmtCount prints a count or rate with a k/M/G suffix.
func fmtCount(v float64) string {
	switch {
	case v >= 1e9:
		return sig3(v/1e9) + "G"
	case v >= 1e6:
		return sig3(v/1e6) + "M"
	case v >= 1e4:
		return sig3(v/1e3) + "k"
	}
	return fmt.Sprintf("%.0f", v)
}

func sortedCopy(lat []int64) []int64 {
	s := slices.Clone(lat)
	slices.Sort(s)
	return s
}
