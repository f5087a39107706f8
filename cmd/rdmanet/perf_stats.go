//go:build linux

package main

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/go-rdma/rdmanet/internal/perf"
)

// writeHistogram prints buckets as text bars, width characters for the
// fullest bucket, with each bucket's count and cumulative share.
func writeHistogram(w io.Writer, hs []perf.Bucket, width int) {
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
