//go:build linux

package rdmanet_test

import (
	"testing"
	"time"

	"github.com/go-rdma/rdmanet/rdmanet"
	"github.com/stretchr/testify/require"
)

// A deadline of exactly now has passed by the time the call looks: reads
// fail at once with a timeout, also with a datagram waiting (which the
// next read gets), and a write fails at once and sends nothing.
func TestDeadlineExactlyNow(t *testing.T) {
	t.Parallel()
	g := newGroup()
	rx, tx := listen(t, g), listen(t, g)
	_, err := tx.WriteTo([]byte("waiting"), g)
	require.NoError(t, err)
	mustRead(t, tx) // its own copy (loopback is on): rx has had time to get it too
	reads := []struct {
		name string
		read func() error
	}{
		{"ReadFromAddr", func() error { _, _, err := rx.ReadFromAddr(make([]byte, 64)); return err }},
		{"ReadBatch", func() error { _, err := rx.ReadBatch(make([]rdmanet.Message, 2)); return err }},
		{"ReadLend", func() error { _, err := rx.ReadLend(); return err }},
	}
	for _, r := range reads {
		start := time.Now()
		require.NoError(t, rx.SetReadDeadline(start))
		timeoutErr(t, r.read(), r.name)
		require.Less(t, time.Since(start), time.Second, "%s with a deadline of now: it waited", r.name)
	}
	require.NoError(t, rx.SetReadDeadline(time.Time{}))
	b, _ := mustRead(t, rx)
	require.Equal(t, "waiting", string(b), "the datagram waiting through the timed-out reads")

	sent := tx.Stats().Sent
	start := time.Now()
	require.NoError(t, tx.SetWriteDeadline(start))
	_, err = tx.WriteTo([]byte("late"), g)
	timeoutErr(t, err, "WriteTo")
	require.Equal(t, sent, tx.Stats().Sent, "sent with a write deadline of now")
	require.NoError(t, tx.SetWriteDeadline(time.Time{}))
	expectNothing(t, rx, 50*time.Millisecond)
}
