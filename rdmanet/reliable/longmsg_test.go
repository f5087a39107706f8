package reliable

import (
	"errors"
	"fmt"
	"testing"
	"time"

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

// The gaps on either side of a message too long to keep are asked for
// up to its first datagram and from just past its last, and none of its
// own datagrams ever is: they are not kept, the first and the last
// included. Message 1 (seq 1) is lost; message 2, too long, takes seqs
// 2 to 1001; message 3 (seq 1002) is lost; message 4 (seq 1003) came.
func TestNAKsAroundTooLongMessage(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{RecvWindow: 4096, SenderTimeout: time.Hour})
	raw := rawConn(t, group)
	from := *raw.LocalAddr().(*rdmanet.Addr)                   // where the NAKs go
	const session, nfrag = 92, 1000                            // more than MaxMessage (64 KiB) takes at any MTU
	inject(r, dataDG(session, 0, 0, 0, 1, []byte("m0")), from) // places the sender at seq 0
	inject(r, dataDG(session, 2, 2, 0, nfrag, make([]byte, 100)), from)
	inject(r, dataDG(session, 3+nfrag, 4, 0, 1, []byte("m4")), from)

	// waitNAK reads NAKs until one from seq want; each must ask for one
	// datagram, at seq 1 or 1002.
	buf := make([]byte, 1<<16)
	waitNAK := func(want uint64) {
		t.Helper()
		for {
			seq, target, count := readNAK(t, raw, buf, fmt.Sprintf("waiting for a NAK of seq %d", want))
			require.Equal(t, uint32(session), target, "the NAK's sender")
			require.Contains(t, []uint64{1, 2 + nfrag}, seq, "got a NAK from seq %d, want 1 or %d", seq, 2+nfrag)
			require.Equal(t, uint32(1), count, "got a NAK from seq %d for %d datagrams, want 1 (not the too-long message's)", seq, count)
			if seq == want {
				return
			}
		}
	}
	// The first round is the gap before the too-long message; the one
	// after it was found later and has its own round, once the first
	// is filled.
	waitNAK(1)
	inject(r, dataDG(session, 1, 1, 0, 1, []byte("m1")), from)
	waitNAK(2 + nfrag)
}

// A message of MaxMessage bytes goes out in one write whatever MaxMessage
// is past a whole number of fragments: a MaxMessage one byte past 64 or
// 100 fragments is 65 or 101 datagrams, and a write of it stages them all
// (s.msgs holds a largest message) and the receiver gets it intact.
func TestWriteMaxMessageOfAPartFragment(t *testing.T) {
	frag := listenT(t, newGroup(), Config{}).frag
	for _, tc := range []struct {
		max, nfrag int
	}{{64 * frag, 64}, {64*frag + 1, 65}, {100 * frag, 100}, {100*frag + 1, 101}} {
		group := newGroup()
		cfg := Config{MaxMessage: tc.max}
		rx := listenT(t, group, cfg)
		tx := listenT(t, group, cfg)
		require.GreaterOrEqual(t, len(tx.snd.msgs), tc.nfrag, "MaxMessage %d: got room for %d datagrams a post, want %d at least", tc.max, len(tx.snd.msgs), tc.nfrag)
		errs := make(chan error, 1)
		go func() {
			_, err := readAll(rx, 1, tc.max, 5*time.Second)
			errs <- err
		}()
		n, err := tx.WriteTo(payload(make([]byte, tc.max), 0), group)
		require.NoError(t, err, "MaxMessage %d", tc.max)
		require.Equal(t, tc.max, n)
		require.Equal(t, uint64(tc.nfrag), tx.Stats().DatagramsSent, "MaxMessage %d: got %d datagrams sent, want %d", tc.max, tx.Stats().DatagramsSent, tc.nfrag)
		require.NoError(t, <-errs, "MaxMessage %d", tc.max)
	}
}

// A window start inside a message too long (forged: a sender's window
// starts at a message) moves next past that message, to the message
// numbered after it: the sender's next message, right after the long
// one, is delivered, not dropped as implausible. A window start at the
// long message's end names the message there itself, and the receiver
// takes its number: a forger's message too long may claim a number
// ahead of the sender's (here message 5 where the sender's window
// starts with message 3), and the sender's message 3 is delivered.
func TestWindowStartInsideTooLongMessage(t *testing.T) {
	group := newGroup()
	const session, nfrag = 91, 1000 // more than MaxMessage (64 KiB) takes at any MTU
	for _, tc := range []struct {
		name           string
		longMsg        uint64 // the message too long's number
		lowSeq, lowMsg uint64 // where the window starts
	}{
		{"inside, naming the long message", 2, 500, 2},
		{"at its end, the long message numbered ahead", 5, 10 + nfrag, 3},
	} {
		r := listenT(t, group, Config{RecvWindow: 4096, SenderTimeout: time.Hour})
		from := rdmanet.Addr{QPN: 0x4291}
		inject(r, dataDG(session, 0, 0, 0, 1, []byte("m0")), from)
		// Message 1 (seqs 1 to 9) missing; a message too long at [10, 1010).
		inject(r, dataDG(session, 10, tc.longMsg, 0, nfrag, make([]byte, 100)), from)
		b, _, err := readMsg(t, r)
		require.NoError(t, err, tc.name)
		require.Equal(t, "m0", string(b), tc.name)
		inject(r, heartbeatDG(session, 10+nfrag, 3, tc.lowSeq, tc.lowMsg), from)
		r.rcv.mu.Lock()
		p := peerOf(t, r, session)
		next, nextMsg := p.next, p.nextMsg
		r.rcv.mu.Unlock()
		require.Equal(t, [2]uint64{10 + nfrag, 3}, [2]uint64{next, nextMsg}, "%s: next and its message after the window start", tc.name)

		before := r.Stats().Implausible
		inject(r, dataDG(session, 10+nfrag, 3, 0, 1, []byte("m3")), from)
		require.Equal(t, before, r.Stats().Implausible, "%s: message 3 implausible; stats %+v", tc.name, r.Stats())
		for {
			b, _, err = readMsg(t, r)
			var le *LossError
			if !errors.As(err, &le) {
				break
			}
		}
		require.NoError(t, err, tc.name)
		require.Equal(t, "m3", string(b), tc.name)
	}
}

// A message of more than 64 fragments (MaxMessage 1 MiB: 258 datagrams
// at MTU 4096, 1053 at rxe's 1024) goes out and arrives whole: the
// sender's batch has room for every fragment of the longest message.
func TestMessageOfManyFragments(t *testing.T) {
	group := newGroup()
	cfg := Config{MaxMessage: 1 << 20, RecvWindow: 4096} // two such messages at MTU 1024
	rx := listenT(t, group, cfg)
	tx := listenT(t, group, cfg)
	require.Greater(t, (cfg.MaxMessage+tx.frag-1)/tx.frag, 64)
	msg := make([]byte, cfg.MaxMessage)
	for i := range msg {
		msg[i] = byte(i * 7)
	}
	_, err := tx.WriteTo(msg, group)
	require.NoError(t, err)
	require.NoError(t, rx.SetReadDeadline(time.Now().Add(10*time.Second)))
	buf := make([]byte, cfg.MaxMessage+1)
	n, _, err := rx.ReadFrom(buf)
	require.NoError(t, err)
	require.Equal(t, msg, buf[:n])
}
