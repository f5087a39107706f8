//go:build linux

package rdmanet_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// BenchmarkSendFrom: WriteBatch of 64 datagrams from Go memory (posted
// inline up to the QP's inline limit, else copied into the send ring)
// beside the same from a SendBuffer (posted from the registered memory),
// in one run. The sender joins send-only and nothing reads the group, so
// what is measured is the send path. On rdma-core the inline limit is 256
// by default: 64 B compares inline with registered memory, 1024 B the
// ring copy with it.
//
// sendbuffer posts up to the inline limit inline from the registered
// memory (the provider copies it into the work request), longer ones by
// their SGE; sendbuffer-sge posts every one by its SGE.
func BenchmarkSendFrom(b *testing.B) {
	for _, size := range []int{64, 1024} {
		for _, from := range []string{"go-memory", "sendbuffer", "sendbuffer-sge"} {
			b.Run(fmt.Sprintf("%s/%dB", from, size), func(b *testing.B) {
				benchSendFrom(b, size, from != "go-memory", from == "sendbuffer-sge")
			})
		}
	}
}

func benchSendFrom(b *testing.B, size int, registered, sgeOnly bool) {
	g := newGroup()
	tx := listen(b, g, func(lc *rdmanet.ListenConfig) { lc.SendOnly = true })
	rdmanet.SetSendBufferInline(tx, !sgeOnly)
	if size > tx.MTU() {
		b.Skipf("size %d over MTU %d", size, tx.MTU())
	}
	ga, err := tx.GroupAddr(g)
	require.NoError(b, err)
	const batch = 64
	var mem []byte
	if registered {
		sb, err := tx.NewSendBuffer(batch * size)
		require.NoError(b, err)
		mem = sb.Bytes()
	} else {
		mem = make([]byte, batch*size)
	}
	ms := make([]rdmanet.Message, batch)
	for i := range ms {
		ms[i] = rdmanet.Message{Buffer: mem[i*size : (i+1)*size], Addr: ga}
	}
	before := tx.Stats()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if _, err := tx.WriteBatch(ms); err != nil {
			b.Fatal(err)
		}
	}
	el := time.Since(start)
	b.StopTimer()
	st := tx.Stats()
	b.ReportMetric(float64(b.N*batch)/el.Seconds(), "msgs/s")
	b.ReportMetric(float64(st.SentRegistered-before.SentRegistered)/float64(b.N*batch), "registered/msg")
}
