//go:build linux

package soft_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// BenchmarkSendRecv measures PostSend on one QP and Poll+PostRecv on
// another, over lo, per message, in batches of 1 and 32.
func BenchmarkSendRecv(b *testing.B) {
	for _, size := range []int{64, 1024} {
		for _, batch := range []int{1, 32} {
			b.Run(fmt.Sprintf("%dB/batch%d", size, batch), func(b *testing.B) {
				a := newEndpoint(b, verbs.QPConfig{})
				s := newEndpoint(b, verbs.QPConfig{})
				m, _ := a.join("239.206.6.6", false)
				_, ah := s.join("239.206.6.6", true)
				a.postRecvs(0, nBufs)
				wrs := make([]verbs.SendWR, batch)
				for i := range wrs {
					wrs[i] = verbs.SendWR{WRID: uint64(i), SGE: s.sendSGE(0, size), AH: ah, RemoteQPN: m.RemoteQPN, RemoteQKey: m.QKey}
				}
				wrs[batch-1].Flags = verbs.SendSignaled
				wcs := make([]verbs.WC, batch)
				recv := make([]verbs.RecvWR, batch)
				b.ReportAllocs()
				b.SetBytes(int64(size * batch))
				start := time.Now()
				msgs := 0
				for b.Loop() {
					if _, err := s.qp.PostSend(wrs); err != nil {
						b.Fatal(err)
					}
					s.qp.SendCQ().Poll(wcs)
					for got := 0; got < batch; {
						n, err := a.qp.RecvCQ().Poll(wcs[:batch-got])
						if err != nil {
							b.Fatal(err)
						}
						for i := range n {
							recv[i] = verbs.RecvWR{WRID: wcs[i].WRID, SGE: a.recvSGE(int(wcs[i].WRID))}
						}
						if _, err := a.qp.PostRecv(recv[:n]); err != nil {
							b.Fatal(err)
						}
						got += n
					}
					msgs += batch
				}
				b.ReportMetric(float64(msgs)/time.Since(start).Seconds(), "msgs/s")
				if d := a.qp.Drops(); d.Overflow != 0 {
					b.ReportMetric(float64(d.Overflow), "drops")
				}
			})
		}
	}
}
