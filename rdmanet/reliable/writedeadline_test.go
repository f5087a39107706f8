package reliable

import (
	"errors"
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
