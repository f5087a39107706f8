package reliable

import (
	"os"
	"sync/atomic"
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

// A read with no deadline arms no timer: it parks until the receive loop
// wakes it (a message ready, the hand-over of the underlying conn). The
// test's func stands in for the read timer's before any read, and counts
// its firings. Seed 123: waitRead's `dl != 0` -> `dl != 1` armed the
// timer for no deadline, at minus the time, so the reader woke at once
// and looked again, round and round until the receive loop's next batch
// (on an idle conn, until something came; TestHostile's load alone
// showed it).
func TestReadWithoutDeadlineArmsNoTimer(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{})
	tx := listenT(t, group, Config{})
	var fired atomic.Int64
	r.readTimer.Stop()
	r.readTimer = time.AfterFunc(time.Hour, func() { fired.Add(1); r.rcv.wake() })
	r.readTimer.Stop()
	done := make(chan error, 1)
	go func() {
		_, _, err := r.ReadFrom(make([]byte, 64))
		done <- err
	}()
	waitReaderAsks(t, r)
	writeN(t, tx, group, 0, 1, 64)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatalf("a read with no deadline did not return the message written in 10 s; stats %+v", r.Stats())
	}
	require.Zero(t, fired.Load(), "firings of the read timer for a read with no deadline")
}
