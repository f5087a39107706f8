//go:build linux

package rdmanet_test

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/poller"
	"github.com/go-rdma/rdmanet/internal/testenv"
	"github.com/go-rdma/rdmanet/internal/verbs/rdmacore"
	"github.com/go-rdma/rdmanet/rdmanet"
)

// TestPingPongCrossings counts the data-path cgo crossings of an
// event-driven ping-pong on rdma-core (a request on a group, answered by
// unicast; both conns in this process, Spin 0). Each side waits 1 ms
// before it writes, so that the reader is asleep in the netpoller when
// the message comes (on rxe0 to itself a message is often complete
// before its post returns, and a reader that has not slept yet finds it
// by the poll after arming). A message that wakes a sleeping reader
// costs poll, arm, poll, then after the wake one read of the event and
// one poll, plus the writer's reap and post in one crossing
// (verbs.QP.PollPostSend): 6 per message, 12 per round trip. The eager
// pattern (poller.SetEagerDrain: a read that says EAGAIN before each
// sleep, and a second GetEvents after each wake) costs 8 per message; the
// test measures both in the same run and wants the saving.
func TestPingPongCrossings(t *testing.T) {
	testenv.NeedDevice(t)
	const rounds = 200
	measure := func(t *testing.T, group byte) float64 {
		g := &net.UDPAddr{IP: net.IPv4(239, 1, 51, group)}
		echo := listen(t, g)
		asker := listen(t, g, func(lc *rdmanet.ListenConfig) { lc.SendOnly = true })
		done := make(chan error, 1)
		go func() {
			buf := make([]byte, 64)
			for i := 0; i < rounds+10; i++ {
				echo.SetReadDeadline(time.Now().Add(5 * time.Second))
				n, from, err := echo.ReadFromAddr(buf)
				if err != nil {
					done <- err
					return
				}
				time.Sleep(time.Millisecond) // the asker is asleep when the answer comes
				if _, err := echo.WriteTo(buf[:n], &from); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
		buf := make([]byte, 64)
		var c0 uint64
		for i := 0; i < rounds+10; i++ {
			if i == 10 { // after a warm-up: address handle made, rings settled
				c0 = rdmacore.Crossings()
			}
			time.Sleep(time.Millisecond) // the echo is asleep when the request comes
			_, err := asker.WriteTo(buf, g)
			require.NoError(t, err)
			asker.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, _, err = asker.ReadFromAddr(buf)
			require.NoError(t, err, "answer %d", i)
		}
		per := float64(rdmacore.Crossings()-c0) / rounds
		require.NoError(t, <-done)
		return per
	}
	was := poller.SetEagerDrain(true)
	t.Cleanup(func() { poller.SetEagerDrain(was) })
	eager := measure(t, 1)
	poller.SetEagerDrain(false)
	now := measure(t, 2)
	t.Logf("crossings per round trip: %.2f (eager drains %.2f)", now, eager)
	require.LessOrEqual(t, now, 13.0, "crossings per round trip")
	require.GreaterOrEqual(t, eager-now, 2.0, "saving per round trip (eager %.2f, now %.2f)", eager, now)
}
