package reliable

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// peerOf returns the receiver's state of the sender of session, for
// reading under r.rcv.mu.
func peerOf(t testing.TB, r *Conn, session uint32) *peer {
	t.Helper()
	for k, p := range r.rcv.peers {
		if k.session == session {
			return p
		}
	}
	t.Fatalf("sender %d is not tracked", session)
	return nil
}

// A message too long to keep, heard while the messages before it are
// still unread, is passed over at once: contig moves over its place to
// what follows it, and the receiver asks for none of its datagrams (no
// NAK timer runs), although next has not reached it yet.
func TestTooLongNotAskedFor(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{RecvWindow: 4096})
	from := rdmanet.Addr{QPN: 0x4250}
	const session, nfrag = 90, 1000                            // more than MaxMessage (64 KiB) takes at any MTU
	inject(r, dataDG(session, 0, 0, 0, 1, []byte("m0")), from) // unread: next stays 0
	// Message 1, too long, from seq 1 (its first datagram only), then
	// message 2 right after it.
	inject(r, dataDG(session, 1, 1, 0, nfrag, make([]byte, 100)), from)
	inject(r, dataDG(session, 1+nfrag, 2, 0, 1, []byte("m2")), from)

	r.rcv.mu.Lock()
	p := peerOf(t, r, session)
	next, contig, high := p.next, p.contig, p.high
	pending := r.rcv.pending
	r.rcv.mu.Unlock()
	require.Equal(t, [3]uint64{0, 2 + nfrag, 2 + nfrag}, [3]uint64{next, contig, high}, "next, contig, high")
	require.Zero(t, pending, "senders with a NAK timer running")

	b, _, err := readMsg(t, r)
	require.NoError(t, err)
	require.Equal(t, "m0", string(b))
	_, _, err = readMsg(t, r)
	var le *LossError
	require.True(t, errors.As(err, &le), "got %v, want a loss report", err)
	require.Equal(t, uint64(1), le.Messages)
	b, _, err = readMsg(t, r)
	require.NoError(t, err)
	require.Equal(t, "m2", string(b))
}

// A gap the sender's window has left behind is skipped to the first
// message held after it, recognised by its first fragment (frag 0),
// whatever its fragment count: here a message of 256 fragments, whose
// count has a high byte.
func TestWindowStartSkipsToLongMessage(t *testing.T) {
	group := newGroup()
	const nfrag = 256
	// MaxMessage: 256 fragments at any MTU up to 4 KiB.
	r := listenT(t, group, Config{MaxMessage: nfrag * 4096, RecvWindow: 4096})
	from := rdmanet.Addr{QPN: 0x4251}
	const session = 91
	inject(r, dataDG(session, 0, 0, 0, 1, []byte("m0")), from)
	b, _, err := readMsg(t, r)
	require.NoError(t, err)
	require.Equal(t, "m0", string(b))
	// Message 1 (seq 1) is lost; message 2 takes seqs 2 to 257, each
	// fragment one byte.
	want := make([]byte, nfrag)
	for i := range nfrag {
		want[i] = byte(i)
		inject(r, dataDG(session, uint64(2+i), 2, uint16(i), nfrag, want[i:i+1]), from)
	}
	// The sender's window now starts after message 2: message 1 is
	// lost, message 2 is whole here.
	inject(r, heartbeatDG(session, 2+nfrag, 3, 2+nfrag, 3), from)

	_, _, err = readMsg(t, r)
	var le *LossError
	require.True(t, errors.As(err, &le), "got %v, want a loss report", err)
	require.Equal(t, uint64(1), le.Messages, "messages reported lost")
	b, _, err = readMsg(t, r)
	require.NoError(t, err)
	require.Equal(t, want, b, "message 2")
}
