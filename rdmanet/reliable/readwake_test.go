package reliable

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A ReadBatch that finds nothing ready asks to be woken: a message the
// receive loop readies before the reader has asked for the underlying
// conn (the window between nextBatch and rxTake, where no hand-over
// wakes it) wakes it through notify, after the loop's batch. The test
// stands in that window: nextBatch finds nothing, then a message comes
// while the receive loop owns the conn and no reader is in, so nothing
// but that request can wake the reader.
func TestReadBatchNothingReadyIsWoken(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{})
	tx := listenT(t, group, Config{})
	r.rx.mu.Lock()
	owner := r.rx.owner
	r.rx.mu.Unlock()
	require.Equal(t, rxLoop, owner, "a fresh conn: the receive loop reads")

	ms := batchT(4, 64)
	k, from, loss := r.rcv.nextBatch(ms)
	require.Zero(t, k)
	require.Nil(t, from)
	require.Nil(t, loss)
	select {
	case <-r.rcv.notify:
		t.Fatal("woken with nothing ready")
	default:
	}

	writeN(t, tx, group, 0, 1, 64)
	select {
	case <-r.rcv.notify:
	case <-time.After(10 * time.Second):
		t.Fatalf("a message readied for a reader that found nothing did not wake it in 10 s; stats %+v", r.Stats())
	}
	k, _, loss = r.rcv.nextBatch(ms)
	require.Nil(t, loss)
	require.Equal(t, 1, k)
	i, err := checkMessage(ms[0].Buffer[:ms[0].N], 64)
	require.NoError(t, err)
	require.Zero(t, i)
}

// The wake for a reader that found nothing is kept until it parks: the
// reader may not be parked on notify yet when the receive loop readies
// a message for it (between nextBatch and its wait), and a wake then
// dropped would leave it asleep with the message ready until its
// deadline. Here nobody waits on notify: a second message, written once
// the first was handled, is handled in a later batch of the loop, so
// the first batch's wake has been made by then, and it must be there.
func TestWakeKeptUntilTheReaderParks(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{})
	tx := listenT(t, group, Config{})
	require.Equal(t, rxLoop, rxOwnerOf(r), "a fresh conn: the receive loop reads")
	ms := batchT(4, 64)
	k, _, loss := r.rcv.nextBatch(ms)
	require.Zero(t, k)
	require.Nil(t, loss)

	handled := func(n uint64) func() bool {
		return func() bool {
			r.rcv.mu.Lock()
			defer r.rcv.mu.Unlock()
			p := r.rcv.peers[peerKey{addr: tx.local, session: tx.session}]
			return p != nil && p.high >= n
		}
	}
	writeN(t, tx, group, 0, 1, 64)
	waitCond(t, "the first message handled", handled(1))
	writeN(t, tx, group, 1, 2, 64)
	waitCond(t, "the second message handled", handled(2))
	select {
	case <-r.rcv.notify:
	default:
		t.Fatalf("no wake kept for the reader that found nothing; stats %+v", r.Stats())
	}
	k, _, loss = r.rcv.nextBatch(ms)
	require.Nil(t, loss)
	require.Equal(t, 2, k)
}
