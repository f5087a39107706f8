package reliable

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A write that returns its deadline's error sent nothing: the receiver's
// first message is the one written after it, and nothing is reported lost.
func TestWriteAfterDeadlineSendsNothing(t *testing.T) {
	group := newGroup()
	tx := listenT(t, group, Config{FlowControl: FlowMin})
	rx := listenT(t, group, Config{})
	waitReceivers(t, tx, 1)

	msg := make([]byte, 64)
	require.NoError(t, tx.SetWriteDeadline(time.Now().Add(-time.Second)))
	_, err := tx.WriteTo(payload(msg, 1), group)
	require.True(t, errors.Is(err, os.ErrDeadlineExceeded), "got %v, want a deadline error", err)
	require.NoError(t, tx.SetWriteDeadline(time.Time{}))
	_, err = tx.WriteTo(payload(msg, 2), group)
	require.NoError(t, err)

	buf := make([]byte, 1024)
	rx.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, _, err := rx.ReadFrom(buf)
	require.NoError(t, err)
	got, err := checkMessage(buf[:n], len(msg))
	require.NoError(t, err)
	require.Equal(t, uint64(2), got, "the message whose write timed out was delivered")
	st := tx.Stats()
	require.Equal(t, uint64(1), st.MessagesSent, "MessagesSent counts the timed-out write")
}

// A write deadline bounds the caller's writes, not the conn's own sends:
// once it has passed, the sender still heartbeats and repairs, and a
// receiver whose own write deadline has passed still sends NAKs and
// status. Here the last datagram's first copy is lost (tail loss, found
// only by the sender's heartbeat) and both deadlines are in the past by
// the time the first heartbeat after the writes goes. Before, every send
// on the underlying conn failed once the user's deadline had passed: the
// receiver never learnt of the last message, and the senders of
// TestHostile whose last write's deadline had passed left their
// receivers short of the stream's end.
func TestWriteDeadlineSparesProtocol(t *testing.T) {
	const count, size = 10, 64
	group := newGroup()
	rx := listenDrop(t, group, Config{}, dropFirst(func(seq uint64) bool { return seq == count-1 }))
	tx := listenT(t, group, Config{HeartbeatInterval: 200 * time.Millisecond, HeartbeatMax: 400 * time.Millisecond})
	waitReceivers(t, tx, 1)
	require.NoError(t, rx.SetWriteDeadline(time.Now().Add(-time.Second)))
	require.NoError(t, tx.SetWriteDeadline(time.Now().Add(5*time.Second)))
	msg := make([]byte, size)
	for i := range uint64(count) {
		_, err := tx.WriteTo(payload(msg, i), group)
		require.NoError(t, err)
	}
	require.NoError(t, tx.SetWriteDeadline(time.Now().Add(-time.Second)))
	losses, err := readAll(rx, count, size, 5*time.Second)
	require.NoError(t, err, "the last message, lost once, comes by a heartbeat, a NAK and a repair sent after the deadlines passed; receiver %+v, sender %+v", rx.Stats(), tx.Stats())
	require.Zero(t, losses)
	require.NotZero(t, rx.Stats().Recovered)
	_, err = tx.WriteTo(msg, group)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "the caller's writes still end at the deadline")
}

// SetDeadline sets both: a read and a write past it fail with the
// deadline's error, and a zero deadline clears both; on a closed conn it
// fails.
func TestSetDeadlineSetsReadAndWrite(t *testing.T) {
	group := newGroup()
	c := listenT(t, group, Config{})
	require.NoError(t, c.SetDeadline(time.Now().Add(-time.Second)))
	_, err := c.WriteTo([]byte("late"), group)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "write")
	_, _, err = c.ReadFrom(make([]byte, 64))
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "read")

	require.NoError(t, c.SetDeadline(time.Time{}))
	_, err = c.WriteTo([]byte("on time"), group)
	require.NoError(t, err, "write after the deadline was cleared")

	require.NoError(t, c.Close())
	require.ErrorIs(t, c.SetDeadline(time.Now()), net.ErrClosed)
}
