package reliable

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// setInputHook makes c's unread-input check (inputWaits) report what f
// says; r.mu orders it with the timer loop, which reads it under r.mu.
func setInputHook(c *Conn, f func() bool) {
	c.rcv.mu.Lock()
	c.inputHook = f
	c.rcv.mu.Unlock()
}

// A NAK due while the conn has received datagrams it has not read yet
// waits for them (they may hold the repair, or the datagram it would ask
// for): counted in NAKsHeld, sent once the input is read if still
// needed. A receiver whose input never runs dry still asks, its back-off
// bound after the NAK was due. A forged sender sends messages 0 and 2:
// message 1 is the gap.
func TestNAKWaitsForUnreadInput(t *testing.T) {
	for _, tc := range []struct {
		name  string
		delay time.Duration // Config.NAKDelay: the back-off bound, and how long a NAK may be held
		drain bool          // the input runs dry while the NAK is held
	}{
		{"drained", time.Second, true},
		{"never-dry", 50 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			group := newGroup()
			r := listenT(t, group, Config{NAKDelay: tc.delay})
			var waits atomic.Bool
			waits.Store(true)
			setInputHook(r, waits.Load)
			raw := rawConn(t, group)
			send(t, raw, group, r, func(s Stats) uint64 { return uint64(s.Senders) }, dataDG(7, 0, 0, 0, 1, []byte("m0")))
			_, err := raw.WriteTo(dataDG(7, 2, 2, 0, 1, []byte("m2")), group)
			require.NoError(t, err)
			require.Eventually(t, func() bool { return r.Stats().NAKsHeld == 1 }, 10*time.Second, time.Millisecond,
				"the NAK for message 1, due while input waits unread, is not held")
			if tc.drain {
				// Held for up to a second: nothing sent yet.
				require.Zero(t, r.Stats().NAKsSent, "a NAK held for unread input was sent")
				waits.Store(false)
			}
			require.Eventually(t, func() bool { return r.Stats().NAKsSent >= 1 }, 10*time.Second, time.Millisecond,
				"the held NAK never went")
			require.Equal(t, uint64(1), r.Stats().NAKsHeld, "one round, held once")
		})
	}
}

// A NAK held at its due for unread input is looked at again
// inputRecheck later (or when the input is read), not at once: a tick
// at the due exactly returns due + inputRecheck. The due is moved 10
// minutes ahead, where the timer loop leaves it alone.
func TestHeldNAKLooksAgainAfterInputRecheck(t *testing.T) {
	r := listenT(t, newGroup(), Config{NAKDelay: time.Second, SenderTimeout: time.Hour})
	setInputHook(r, func() bool { return true })
	from := rdmanet.Addr{QPN: 0x4255}
	const session = 99
	inject(r, dataDG(session, 0, 0, 0, 1, []byte("m0")), from)
	inject(r, dataDG(session, 2, 2, 0, 1, []byte("m2")), from) // seq 1 missing
	rc := &r.rcv
	rc.mu.Lock()
	p := peerOf(t, r, session)
	due := r.now() + int64(10*time.Minute)
	p.nak.due = due
	rc.mu.Unlock()
	require.Equal(t, due+inputRecheck, rc.tick(due), "when a tick at a held NAK's due looks again")
	require.Equal(t, uint64(1), r.Stats().NAKsHeld, "the NAK held")
	require.Zero(t, r.Stats().NAKsSent)
}

// inputWaits, with no test hook, asks the underlying conn whether
// datagrams wait unread in it (rdmanet/pending.go, through
// internal/unread): a conn nobody reads says no, then yes once a datagram
// reached it, and no again once it was read. Seed 117: `unread.Check ==
// nil` -> `!=` made inputWaits say no always, and every NAK test sets
// the hook.
func TestInputWaitsAsksTheUnderlyingConn(t *testing.T) {
	group := newGroup()
	under := rawConn(t, group) // joined, read by nobody
	c := &Conn{conn: under}
	require.False(t, c.inputWaits(), "nothing received")
	raw := rawConn(t, group)
	_, err := raw.WriteTo(dataDG(9, 0, 0, 0, 1, []byte("m0")), group)
	require.NoError(t, err)
	waitCond(t, "inputWaits sees the datagram", c.inputWaits)
	buf := make([]byte, 2048)
	under.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, _, err := under.ReadFrom(buf)
	require.NoError(t, err)
	require.Equal(t, headerLen+2, n)
	require.False(t, c.inputWaits(), "the datagram read")
}
