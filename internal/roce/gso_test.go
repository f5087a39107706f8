package roce

import (
	"slices"
	"testing"
)

// CutRuns, driven without a socket: which datagrams share a GSO run and
// the IP ID (segment number) each gets.
func TestCutRuns(t *testing.T) {
	a, b := [4]byte{239, 1, 1, 1}, [4]byte{239, 1, 1, 2}
	same := func(n int, d [4]byte) [][4]byte {
		ds := make([][4]byte, n)
		for i := range ds {
			ds[i] = d
		}
		return ds
	}
	lens := func(n, l int) []int {
		ls := make([]int, n)
		for i := range ls {
			ls[i] = l
		}
		return ls
	}
	ids := func(runs ...int) []uint16 { // each run's length -> 0, 1, ... per run
		var s []uint16
		for _, n := range runs {
			for i := range n {
				s = append(s, uint16(i))
			}
		}
		return s
	}
	tests := []struct {
		name     string
		dst      [][4]byte
		dlen     []int
		gso      bool
		runs     []int
		segments []uint16
	}{
		{"empty", nil, nil, true, nil, nil},
		{"one", same(1, a), []int{100}, true, []int{0}, ids(1)},
		{"equal lengths, one destination", same(4, a), lens(4, 100), true, []int{0}, ids(4)},
		{"without GSO every datagram alone", same(3, a), lens(3, 100), false, []int{0, 1, 2}, ids(1, 1, 1)},
		{"a new destination starts a run", [][4]byte{a, a, b, b}, lens(4, 100), true, []int{0, 2}, ids(2, 2)},
		{"a shorter last segment ends the run", same(4, a), []int{100, 100, 60, 100}, true, []int{0, 3}, ids(3, 1)},
		{"a longer one starts a run", same(3, a), []int{60, 100, 100}, true, []int{0, 1}, ids(1, 2)},
		{"at most MaxGSOSegs segments", same(MaxGSOSegs+1, a), lens(MaxGSOSegs+1, 10), true, []int{0, MaxGSOSegs}, ids(MaxGSOSegs, 1)},
		{"at most MaxGSOBytes", same(20, a), lens(20, 4096), true, []int{0, MaxGSOBytes / 4096}, ids(MaxGSOBytes/4096, 20-MaxGSOBytes/4096)},
		{"back to a destination is a new run", [][4]byte{a, b, a}, lens(3, 100), true, []int{0, 1, 2}, ids(1, 1, 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seg := make([]uint16, len(tt.dlen))
			runs := CutRuns(nil, seg, tt.dst, tt.dlen, tt.gso)
			if !slices.Equal(runs, tt.runs) {
				t.Errorf("runs: got %v, want %v", runs, tt.runs)
			}
			if len(tt.dlen) > 0 && !slices.Equal(seg, tt.segments) {
				t.Errorf("segment IDs: got %v, want %v", seg, tt.segments)
			}
		})
	}
}
