package reliable

import (
	"net"
	"testing"

	"github.com/go-rdma/rdmanet/rdmanet"
	"github.com/stretchr/testify/require"
)

// closedErr asserts err is what a closed conn returns: a *net.OpError
// wrapping net.ErrClosed.
func closedErr(t testing.TB, err error, what string) {
	t.Helper()
	require.ErrorIs(t, err, net.ErrClosed, what)
	var op *net.OpError
	require.ErrorAs(t, err, &op, what)
}

// A second Close returns a *net.OpError (Op "close") wrapping
// net.ErrClosed, as rdmanet.Conn's and net.UDPConn's do.
func TestCloseTwice(t *testing.T) {
	c := listenT(t, newGroup(), Config{Linger: -1})
	require.NoError(t, c.Close())
	err := c.Close()
	closedErr(t, err, "the second Close")
	var op *net.OpError
	require.ErrorAs(t, err, &op)
	require.Equal(t, "close", op.Op)
	closedErr(t, c.Close(), "the third Close")
}

// WriteTo takes the group in every form JoinGroup takes it, and nil in
// every form (the group too); anything else fails with ErrWriteAddr and
// sends nothing. Each accepted write arrives, in order. After Close,
// every form fails with net.ErrClosed, 0 bytes written.
func TestWriteToAddrRules(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{})
	tx := listenT(t, group, Config{})
	ga, err := tx.Conn().GroupAddr(group)
	require.NoError(t, err)
	good := []net.Addr{
		group,
		&net.UDPAddr{IP: group.IP, Port: 9}, // another *net.UDPAddr, another port
		&net.IPAddr{IP: group.IP},
		&ga,
		nil,
		(*net.UDPAddr)(nil),
		(*net.IPAddr)(nil),
		(*rdmanet.Addr)(nil),
	}
	bad := []net.Addr{
		&net.UDPAddr{IP: net.IPv4(239, 1, 1, 1)}, // another group
		&net.IPAddr{IP: net.IPv4(239, 1, 1, 1)},
		&net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9},
		r.LocalAddr(), // a peer
		&net.TCPAddr{IP: group.IP, Port: 1},
	}
	for _, a := range bad {
		n, err := tx.WriteTo([]byte("x"), a)
		require.ErrorIs(t, err, ErrWriteAddr, "WriteTo(%T %v)", a, a)
		require.Zero(t, n)
		var op *net.OpError
		require.ErrorAs(t, err, &op)
	}
	b := make([]byte, 64)
	for i, a := range good {
		n, err := tx.WriteTo(payload(b, uint64(i)), a)
		require.NoError(t, err, "WriteTo(%T %v)", a, a)
		require.Equal(t, len(b), n)
	}
	for i, a := range good {
		require.Equal(t, uint64(i), readOne(t, r, len(b)), "message written to %T %v", a, a)
	}
	require.Equal(t, uint64(len(good)), tx.Stats().MessagesSent, "messages sent: the refused writes sent nothing")
	require.NoError(t, tx.Close())
	for _, a := range append(good, bad...) {
		n, err := tx.WriteTo([]byte("x"), a)
		closedErr(t, err, "WriteTo after Close")
		require.Zero(t, n, "bytes written after Close")
	}
}

// WriteBatch takes []rdmanet.Message as rdmanet.Conn's does: each Addr
// is the group's or zero (the group); at the first message it cannot
// send, it returns how many went before and the error, and sets N of
// those.
func TestWriteBatchAddrRules(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{MaxMessage: 10000})
	tx := listenT(t, group, Config{MaxMessage: 10000})
	ga, err := tx.Conn().GroupAddr(group)
	require.NoError(t, err)
	msg := func(i uint64, a rdmanet.Addr) rdmanet.Message {
		return rdmanet.Message{Buffer: payload(make([]byte, 64), i), Addr: a}
	}
	ms := []rdmanet.Message{msg(0, ga), msg(1, rdmanet.Addr{}), msg(2, ga)}
	n, err := tx.WriteBatch(ms)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	for i := range ms {
		require.Equal(t, 64, ms[i].N, "N of message %d", i)
	}

	peer := *r.LocalAddr().(*rdmanet.Addr)
	ms = []rdmanet.Message{msg(3, ga), msg(4, peer), msg(99, ga)}
	n, err = tx.WriteBatch(ms)
	require.ErrorIs(t, err, ErrWriteAddr)
	var op *net.OpError
	require.ErrorAs(t, err, &op)
	require.Equal(t, 1, n, "messages sent before the one to a peer")
	require.Equal(t, 64, ms[0].N)
	require.Zero(t, ms[2].N, "N of a message not sent")

	ms = []rdmanet.Message{msg(4, ga), {Buffer: make([]byte, 10001)}, msg(99, ga)}
	n, err = tx.WriteBatch(ms)
	require.ErrorIs(t, err, rdmanet.ErrMessageTooLong)
	require.Equal(t, 1, n, "messages sent before the one too long")

	for i := uint64(0); i < 5; i++ {
		require.Equal(t, i, readOne(t, r, 64))
	}
	require.Equal(t, uint64(5), tx.Stats().MessagesSent)

	require.NoError(t, tx.Close())
	n, err = tx.WriteBatch([]rdmanet.Message{msg(5, ga)})
	closedErr(t, err, "WriteBatch after Close")
	require.Zero(t, n)
}

// A reliable conn needs a group: ListenMulticast with none fails as a
// *net.OpError, and so does a bad Config, with the conn under it closed,
// and a bad config of the conn underneath.
func TestListenErrors(t *testing.T) {
	lc := ListenConfig{Conn: *testListenConfig()}
	_, err := lc.ListenMulticast(t.Context(), "rdma", nil, nil)
	require.ErrorIs(t, err, errNoGroup)
	var op *net.OpError
	require.ErrorAs(t, err, &op)
	require.Equal(t, "listen", op.Op)

	lc.Config.Window = 3
	_, err = lc.ListenMulticast(t.Context(), "rdma", nil, newGroup())
	require.ErrorContains(t, err, "Window 3")
	require.ErrorAs(t, err, &op)
	require.Equal(t, "listen", op.Op)

	// The conn underneath fails: its error, as it gave it.
	lc.Config.Window = 0
	var unknown net.UnknownNetworkError
	_, err = lc.ListenMulticast(t.Context(), "udp", nil, newGroup())
	require.ErrorAs(t, err, &unknown, "got %v", err)
	require.ErrorAs(t, err, &op)
	require.Equal(t, "listen", op.Op)
	// Listen passes its rdmanet.ListenConfig to the conn underneath: an
	// unknown backend there is refused.
	_, err = Listen(t.Context(), &rdmanet.ListenConfig{Backend: "nonesuch"}, "rdma", nil, newGroup(), Config{})
	require.ErrorContains(t, err, `unknown backend "nonesuch"`)
	require.ErrorAs(t, err, &op)
	require.Equal(t, "listen", op.Op)
	// The package's ListenMulticast: the zero ListenConfig, the same errors.
	_, err = ListenMulticast("udp", nil, newGroup())
	require.ErrorAs(t, err, &unknown, "got %v", err)
	_, err = ListenMulticast("rdma", nil, nil)
	require.ErrorIs(t, err, errNoGroup)
}

// New takes a conn and one of its groups: a group it is not in fails
// (rdmanet.ErrNotJoined) and leaves the conn open; so does a nil conn.
func TestNewNeedsAJoinedGroup(t *testing.T) {
	group := newGroup()
	raw := rawConn(t, group)
	other := newGroup()
	_, err := New(raw, other, Config{})
	require.ErrorIs(t, err, rdmanet.ErrNotJoined, "group %v", other)
	_, err = raw.GroupAddr(group)
	require.NoError(t, err, "the conn closed by a failed New")
	_, err = New(nil, other, Config{})
	require.ErrorContains(t, err, "nil")
}

// SetReadBuffer and SetWriteBuffer pass to the underlying conn (on the
// software backend its socket buffers; on rdma-core its fixed rings, where
// a size they hold succeeds); a negative size and a closed conn fail.
func TestSetReadWriteBuffer(t *testing.T) {
	c := listenT(t, newGroup(), Config{Linger: -1})
	r := c.ReadBuffer()
	require.Positive(t, r)
	require.Equal(t, c.Conn().ReadBuffer(), r)
	if c.Conn().Backend().Name == rdmanet.BackendSoftware {
		require.NoError(t, c.SetReadBuffer(64<<10))
		require.Equal(t, 64<<10, c.ReadBuffer())
		require.NoError(t, c.SetWriteBuffer(96<<10))
		require.Equal(t, 96<<10, c.WriteBuffer())
	} else {
		require.NoError(t, c.SetReadBuffer(r))
		require.NoError(t, c.SetWriteBuffer(c.WriteBuffer()))
	}
	var op *net.OpError
	require.ErrorAs(t, c.SetReadBuffer(-1), &op)
	require.ErrorAs(t, c.SetWriteBuffer(-1), &op)
	require.NoError(t, c.Close())
	closedErr(t, c.SetReadBuffer(64<<10), "SetReadBuffer after Close")
	closedErr(t, c.SetWriteBuffer(64<<10), "SetWriteBuffer after Close")
}
