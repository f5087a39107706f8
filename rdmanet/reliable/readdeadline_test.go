package reliable

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A read deadline set while the reader reads the underlying conn itself
// (rxReader, blocked in it) ends the read at the deadline: here 300 ms
// away, bounded at 1 s. Nothing else comes to the conn meanwhile (the
// forged datagram that handed it over was the only one; a reliable conn
// does not hear itself), so only the underlying conn's deadline ends the
// wait.
func TestReadDeadlineWhileReadingInline(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{})
	raw := rawConn(t, group)
	done := make(chan error, 1)
	go func() {
		_, _, err := r.ReadFrom(make([]byte, 64))
		done <- err
	}()
	handOverToReader(t, r, raw, group)

	start := time.Now()
	require.NoError(t, r.SetReadDeadline(start.Add(300*time.Millisecond)))
	select {
	case err := <-done:
		took := time.Since(start)
		t.Logf("the read returned after %v", took)
		require.ErrorIs(t, err, os.ErrDeadlineExceeded)
		require.Less(t, took, time.Second, "a read deadline 300 ms away")
	case <-time.After(10 * time.Second):
		t.Fatal("no return of the read in 10 s")
	}
	require.Equal(t, uint64(1), r.Stats().Malformed, "the forged datagram")
}
