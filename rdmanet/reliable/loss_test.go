package reliable

import (
	"fmt"
	"testing"
	"time"

	"github.com/go-rdma/rdmanet/internal/testenv"
	"github.com/stretchr/testify/require"
)

// The loss matrix: 1 sender, 4 receivers, every message exactly once and
// in order with no loss reported, at 0.1%, 1% and 10% random loss taken by
// the kernel (nftables, see netns_test.go), for 64 B and 16 KiB messages.
// FlowMin keeps the sender within the window of the slowest receiver: with
// FlowMax a sender faster than its receivers loses them (and says so).
//
// RDMANET_TEST_FULL=1 multiplies the counts by 50: the issue's
// 1,000,000 x 64 B and 100,000 x 16 KiB.
func TestKernelLoss(t *testing.T) {
	scale := 1
	if testenv.Full() {
		scale = 50
	}
	for _, loss := range []int{100, 1000, 10000} {
		for _, m := range []struct{ count, size int }{{20000, 64}, {10000, 1024}, {2000, 16 << 10}} {
			t.Run(fmt.Sprintf("loss=%g%%/size=%d", float64(loss)/1000, m.size), func(t *testing.T) {
				if lossInNetns(t, loss, "") < 0 {
					return
				}
				count, size := m.count*scale, m.size
				if testing.Short() {
					count /= 10
				}
				st := runMatrix(t, 4, count, size, Config{FlowControl: FlowMin})
				t.Logf("%d receivers x %d msgs of %d B at %g%% loss: %v", 4, count, size, float64(loss)/1000, st)
			})
		}
	}
}

type matrixStats struct {
	took                 time.Duration
	naks, repairs, dups  uint64
	suppressed           uint64
	sent, naksRecv       uint64
	overruns, heartbeats uint64
	recovered            uint64 // the most datagrams one receiver got by repair
}

func (m matrixStats) String() string {
	per := func(n uint64) float64 { return float64(n) / float64(max(m.recovered, 1)) }
	return fmt.Sprintf("%v, %d datagrams, %d recovered by repair (most of one receiver); NAKs sent %d (%.2f per recovered datagram), received %d; repairs %d (%.2f per recovered datagram; %d NAKed datagrams not repeated); duplicates %d, overruns %d, heartbeats %d",
		m.took.Round(time.Millisecond), m.sent, m.recovered, m.naks, per(m.naks), m.naksRecv, m.repairs, per(m.repairs), m.suppressed, m.dups, m.overruns, m.heartbeats)
}

// runMatrix sends count messages of size from one sender to n receivers
// and checks that each receiver reads every message once, in order, with
// no loss reported.
func runMatrix(t testing.TB, n, count, size int, cfg Config) matrixStats {
	group := newGroup()
	rx := make([]*Conn, n)
	for i := range rx {
		rx[i] = listenT(t, group, cfg)
	}
	tx := listenT(t, group, cfg)
	time.Sleep(20 * time.Millisecond)
	if cfg.FlowControl == FlowMin {
		waitReceivers(t, tx, n)
	}
	start := time.Now()
	sendAll(t, tx, group, rx, count, size, 10*time.Second)
	m := matrixStats{took: time.Since(start)}
	// A counter moves after the send it counts returns: a repair (or a
	// NAK) can be received before its sender counted it. Wait, bounded,
	// for the senders' counts to cover what was received.
	rxStats := make([]Stats, n)
	waitCounts := func() {
		deadline := time.Now().Add(2 * time.Second)
		for {
			ts := tx.Stats()
			ok, naks := true, uint64(0)
			for i, r := range rx {
				rxStats[i] = r.Stats()
				naks += rxStats[i].NAKsSent
				if rxStats[i].Recovered+rxStats[i].Duplicates > ts.RepairsMulticast+ts.RepairsUnicast {
					ok = false
				}
			}
			if (ok && ts.NAKsReceived <= naks) || time.Now().After(deadline) {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitCounts()
	ts := tx.Stats()
	m.sent, m.repairs, m.suppressed = ts.DatagramsSent, ts.RepairsMulticast+ts.RepairsUnicast, ts.RepairsSuppressed
	m.naksRecv, m.heartbeats = ts.NAKsReceived, ts.Heartbeats
	// The counts the protocol makes exact, or bounds, whatever the loss.
	nfrag := max((size+tx.frag-1)/tx.frag, 1)
	require.Equal(t, uint64(count), ts.MessagesSent, "sender: messages sent")
	require.Equal(t, uint64(count*nfrag), ts.DatagramsSent, "sender: data datagrams sent the first time (%d messages of %d)", count, nfrag)
	for i := range rx {
		rs := rxStats[i]
		m.naks += rs.NAKsSent
		m.dups += rs.Duplicates
		m.overruns += rs.Overruns
		m.recovered = max(m.recovered, rs.Recovered)
		require.Equal(t, uint64(count), rs.MessagesReceived, "receiver %d: messages; stats %+v", i, rs)
		require.Zero(t, rs.LossesReported, "receiver %d: loss reports; stats %+v", i, rs)
		require.Zero(t, rs.MessagesLost, "receiver %d: messages lost; stats %+v", i, rs)
		// Every repair reaches a receiver at most once, and only a
		// repair can be a second copy or fill a gap.
		require.LessOrEqual(t, rs.Recovered+rs.Duplicates, m.repairs,
			"receiver %d: recovered %d + duplicates %d, from %d repairs", i, rs.Recovered, rs.Duplicates, m.repairs)
		if cfg.FlowControl == FlowMin && ts.ReceiversTimedOut == 0 {
			// The sender never writes past the room a receiver reported.
			require.Zero(t, rs.Overruns, "receiver %d: overruns under FlowMin; stats %+v", i, rs)
		}
	}
	require.LessOrEqual(t, m.naksRecv, m.naks, "NAKs received by the sender, of those sent")
	return m
}
