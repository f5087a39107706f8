package reliable

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// waitKnown waits, bounded, until tx knows n receivers, before any write.
func waitKnown(t testing.TB, tx *Conn, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for tx.Receivers() < n {
		if time.Now().After(deadline) {
			t.Fatalf("before its first write the sender knows %d receivers after 5 s, want %d (its heartbeats: %d)", tx.Receivers(), n, tx.Stats().Heartbeats)
		}
		time.Sleep(time.Millisecond)
	}
}

// A sender heartbeats from Listen on, under either flow control: its
// receivers hear of it before its first write and report their status,
// so Receivers counts them (its doc says to wait on it before writing).
func TestReceiversBeforeWrite(t *testing.T) {
	for _, fc := range []FlowControl{FlowMax, FlowMin} {
		t.Run(fc.String(), func(t *testing.T) {
			group := newGroup()
			listenT(t, group, Config{})
			listenT(t, group, Config{})
			tx := listenT(t, group, Config{FlowControl: fc})
			waitKnown(t, tx, 2)
			require.Zero(t, tx.Stats().MessagesSent)
		})
	}
}

// The loss of a sender's first datagram (seq 0) is repaired like any
// other: the receivers heard the sender's heartbeats before its first
// write, started it at seq 0, and see the first data (seq 1) as a gap.
// Before heartbeats ran from Listen under FlowMax, both receivers started
// at message 1 and message 0 was skipped without a LossError.
func TestFirstDatagramLost(t *testing.T) {
	for _, fc := range []FlowControl{FlowMax, FlowMin} {
		for _, size := range []int{64, 3000} { // one datagram, and three fragments
			t.Run(fmt.Sprintf("%v/%dB", fc, size), func(t *testing.T) {
				group := newGroup()
				first := dropFirst(func(seq uint64) bool { return seq == 0 })
				rx := []*Conn{listenDrop(t, group, Config{}, first), listenDrop(t, group, Config{}, first)}
				tx := listenT(t, group, Config{FlowControl: fc})
				waitKnown(t, tx, len(rx))
				sendAll(t, tx, group, rx, 100, size, 5*time.Second)
				for i, r := range rx {
					st := r.Stats()
					require.Equal(t, uint64(100), st.MessagesReceived, "receiver %d: %+v", i, st)
					require.Zero(t, st.LossesReported, "receiver %d", i)
					require.NotZero(t, st.Recovered, "receiver %d: seq 0 came by repair", i)
				}
			})
		}
	}
}
