//go:build linux

package soft

import (
	"strconv"
	"testing"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

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
