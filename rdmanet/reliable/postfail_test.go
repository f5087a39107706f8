package reliable

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/go-rdma/rdmanet/rdmanet"
	"github.com/stretchr/testify/require"
)

// errPostFailed stands for what the underlying conn's WriteBatch returns
// when it stops part way: its write deadline passing while it waits for
// send queue room, the link going down, the QP resetting.
var errPostFailed = errors.New("post failed part way (test)")

// failPostOnce makes c's next data post send only the first posted of its
// datagrams, for real, and fail.
func failPostOnce(t *testing.T, c *Conn, posted int) {
	failed := false
	c.postHook = func(ms []rdmanet.Message) (int, error) {
		if failed {
			return c.conn.WriteBatch(ms)
		}
		failed = true
		n := min(posted, len(ms))
		k, err := c.conn.WriteBatch(ms[:n])
		if err == nil && k != n {
			err = fmt.Errorf("posted %d of %d", k, n)
		}
		if err != nil {
			t.Errorf("the post the test lets through: %v", err)
		}
		return k, errPostFailed
	}
}

// numbered returns message i of the test: frags datagrams' worth of
// payload (the last one a byte), numbered i.
func numbered(c *Conn, i, frags int) []byte {
	return payload(make([]byte, (frags-1)*c.frag+8), uint64(i))
}

// readNumbered reads one message from r and returns its number, checking
// its bytes and its length.
func readNumbered(t *testing.T, r *Conn, buf []byte, frags int) uint64 {
	t.Helper()
	require.NoError(t, r.SetReadDeadline(time.Now().Add(10*time.Second)))
	n, _, err := r.ReadFrom(buf)
	require.NoError(t, err, "reader stats %+v", r.Stats())
	i, err := checkMessage(buf[:n], len(buf[:n]))
	require.NoError(t, err)
	require.Equal(t, (frags-1)*r.frag+8, n, "message %d's length", i)
	return i
}

// A write whose post fails part way says exactly which messages it wrote:
// those with a datagram posted, whose rest reaches the receivers by
// repair. The others are taken back out of the window, so writing them
// again gives each receiver every message once, in order. (Before, a
// failed post reported none of the messages staged for it as written,
// though they kept their sequence numbers and were repaired: a retry
// delivered them twice.)
func TestWritePostFailsPartWay(t *testing.T) {
	for _, tc := range []struct {
		what    string
		frags   []int // datagrams of each message of the batch
		posted  int   // datagrams the failing post sends
		written int   // messages the batch writes
		key     bool
	}{
		{"none posted", []int{1, 1, 1}, 0, 0, false},
		{"one of three posted", []int{1, 1, 1}, 1, 1, false},
		{"two of three posted, with a key", []int{1, 1, 1}, 2, 2, true},
		{"the middle message in part", []int{1, 3, 1}, 2, 2, false},
		{"the last message in part", []int{1, 1, 3}, 3, 3, false},
		{"the one message in part", []int{4}, 1, 1, false},
	} {
		t.Run(tc.what, func(t *testing.T) {
			cfg := Config{}
			if tc.key {
				cfg.Key = bytes.Repeat([]byte{7}, 32)
			}
			group := newGroup()
			r := listenT(t, group, cfg)
			tx := listenT(t, group, cfg)
			waitReceivers(t, tx, 1) // r placed tx at seq 0: it will ask for what it misses
			failPostOnce(t, tx, tc.posted)

			ms := make([]rdmanet.Message, len(tc.frags))
			for i, f := range tc.frags {
				ms[i].Buffer = numbered(tx, i, f)
			}
			k, err := tx.WriteBatch(ms)
			require.Equal(t, tc.written, k, "messages written (err %v)", err)
			if k < len(ms) {
				require.ErrorIs(t, err, errPostFailed)
			} else {
				require.NoError(t, err, "every message was written: the rest of the last comes by repair")
			}
			st := tx.Stats()
			require.Equal(t, uint64(tc.written), st.MessagesSent, "MessagesSent")
			require.Equal(t, uint64(tc.posted), st.DatagramsSent, "DatagramsSent")

			// The caller writes again what was not written, then one more:
			// a receiver reads each once, in order, and nothing between.
			k2, err := tx.WriteBatch(ms[k:])
			require.NoError(t, err)
			require.Equal(t, len(ms)-k, k2)
			_, err = tx.WriteTo(numbered(tx, len(ms), 1), group)
			require.NoError(t, err)

			buf := make([]byte, r.MaxMessage())
			for i, f := range append(tc.frags, 1) {
				require.Equal(t, uint64(i), readNumbered(t, r, buf, f), "message %d", i)
			}
			require.Zero(t, r.Stats().MessagesLost, "messages reported lost")
		})
	}
}

// WriteTo, one message: when none of its datagrams was posted it returns
// the error and the message is not in the window (writing it again
// delivers it once); when some were, it was written, and WriteTo returns
// no error.
func TestWriteToPostFails(t *testing.T) {
	for _, tc := range []struct {
		frags, posted int
		written       bool
	}{
		{1, 0, false},
		{3, 0, false},
		{3, 2, true},
	} {
		t.Run(fmt.Sprintf("%d of %d posted", tc.posted, tc.frags), func(t *testing.T) {
			group := newGroup()
			r := listenT(t, group, Config{})
			tx := listenT(t, group, Config{})
			waitReceivers(t, tx, 1)
			failPostOnce(t, tx, tc.posted)
			b := numbered(tx, 0, tc.frags)
			n, err := tx.WriteTo(b, group)
			if tc.written {
				require.NoError(t, err)
				require.Equal(t, len(b), n)
			} else {
				require.ErrorIs(t, err, errPostFailed)
				require.Zero(t, n)
				var op *net.OpError
				require.ErrorAs(t, err, &op)
				_, err = tx.WriteTo(b, group) // the caller's retry
				require.NoError(t, err)
			}
			_, err = tx.WriteTo(numbered(tx, 1, 1), group)
			require.NoError(t, err)
			buf := make([]byte, r.MaxMessage())
			require.Equal(t, uint64(0), readNumbered(t, r, buf, tc.frags))
			require.Equal(t, uint64(1), readNumbered(t, r, buf, 1), "the next message, with no second copy of the first before it")
			require.Equal(t, uint64(2), tx.Stats().MessagesSent)
		})
	}
}

// The count of a part-way post holds at the fragment count's edges: an
// empty message (one datagram), one of exactly a datagram's payload, one
// byte more (two), two full datagrams. Each message is told by its
// length and its bytes.
func TestWritePostFailsAtFragmentEdges(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{})
	tx := listenT(t, group, Config{})
	waitReceivers(t, tx, 1)
	lens := []int{0, tx.frag, tx.frag + 1, 2 * tx.frag, 7} // datagrams 1, 1, 2, 2, then the marker
	msg := func(i int) []byte { return bytes.Repeat([]byte{byte(i + 1)}, lens[i]) }
	buf := make([]byte, r.MaxMessage())
	next := 0 // the next message r reads
	for _, tc := range []struct{ posted, written int }{
		{0, 0}, {1, 1}, {2, 2}, {3, 3}, {4, 3}, {5, 4},
	} {
		t.Run(fmt.Sprintf("%d posted", tc.posted), func(t *testing.T) {
			failPostOnce(t, tx, tc.posted)
			ms := make([]rdmanet.Message, 4)
			for i := range ms {
				ms[i].Buffer = msg(i)
			}
			k, err := tx.WriteBatch(ms)
			require.Equal(t, tc.written, k, "messages written (err %v)", err)
			if k < len(ms) {
				require.ErrorIs(t, err, errPostFailed)
			}
			k2, err := tx.WriteBatch(ms[k:])
			require.NoError(t, err)
			require.Equal(t, len(ms)-k, k2)
			_, err = tx.WriteTo(msg(4), group)
			require.NoError(t, err)
			for i := range 5 {
				require.NoError(t, r.SetReadDeadline(time.Now().Add(10*time.Second)))
				n, _, err := r.ReadFrom(buf)
				require.NoError(t, err, "read %d: reader stats %+v", next, r.Stats())
				require.Equal(t, msg(i), buf[:n], "read %d: message %d (by its length and bytes)", next, i)
				next++
			}
		})
	}
}
