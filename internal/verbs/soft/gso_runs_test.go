//go:build linux

package soft

import (
	"slices"
	"strconv"
	"testing"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// cutRuns, driven without a socket: which datagrams share a GSO run and
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
		{"at most maxGSOSegs segments", same(maxGSOSegs+1, a), lens(maxGSOSegs+1, 10), true, []int{0, maxGSOSegs}, ids(maxGSOSegs, 1)},
		{"at most maxGSOBytes", same(20, a), lens(20, 4096), true, []int{0, maxGSOBytes / 4096}, ids(maxGSOBytes/4096, 20-maxGSOBytes/4096)},
		{"back to a destination is a new run", [][4]byte{a, b, a}, lens(3, 100), true, []int{0, 1, 2}, ids(1, 1, 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seg := make([]uint16, len(tt.dlen))
			runs := cutRuns(nil, seg, tt.dst, tt.dlen, tt.gso)
			if !slices.Equal(runs, tt.runs) {
				t.Errorf("runs: got %v, want %v", runs, tt.runs)
			}
			if len(tt.dlen) > 0 && !slices.Equal(seg, tt.segments) {
				t.Errorf("segment IDs: got %v, want %v", seg, tt.segments)
			}
		})
	}
}

// BenchmarkPrepare is the CPU cost of building a batch's datagrams
// (headers, GSO runs, ICRCs) without sending them.
func BenchmarkPrepare(b *testing.B) {
	for _, size := range []int{64, 1024} {
		for _, batch := range []int{1, 32} {
			b.Run(strconv.Itoa(size)+"B/batch"+strconv.Itoa(batch), func(b *testing.B) {
				p, err := verbs.Lookup(verbs.Software)
				if err != nil {
					b.Fatal(err)
				}
				id, err := p.Bind(verbs.BindConfig{})
				if err != nil {
					b.Fatal(err)
				}
				defer id.Close()
				qp, err := id.CreateQP(verbs.QPConfig{})
				if err != nil {
					b.Fatal(err)
				}
				q := qp.(*QP)
				ah, err := qp.CreateAH(verbs.AHAttr{DGID: verbs.GID{10: 0xff, 11: 0xff, 12: 239, 13: 1, 14: 2, 15: 3}, IsGlobal: true, HopLimit: 1})
				if err != nil {
					b.Fatal(err)
				}
				payload := make([]byte, size)
				wrs := make([]verbs.SendWR, batch)
				for i := range wrs {
					wrs[i] = verbs.SendWR{AH: ah, Inline: payload, RemoteQPN: verbs.MulticastQPN, RemoteQKey: verbs.DefaultQKey, Flags: verbs.SendInline}
				}
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					q.sq.mu.Lock()
					if _, err := q.prepare(wrs); err != nil {
						b.Fatal(err)
					}
					q.sq.mu.Unlock()
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/msg")
			})
		}
	}
}
