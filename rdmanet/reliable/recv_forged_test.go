package reliable

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A datagram that names this conn's own session and comes from its own
// address is its own (looped back, or forged) and is dropped, counted;
// the same session from another address is a sender like any other.
func TestOwnSessionFromOwnAddressDropped(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{})
	before := r.Stats()
	inject(r, dataDG(r.session, 0, 0, 0, 1, []byte("me")), r.local)
	require.Equal(t, 0, r.Stats().Senders, "a sender made of our own datagram")
	require.Equal(t, before.Own+1, r.Stats().Own)
}

// A heartbeat whose position is next itself but names a message the
// sender cannot have reached from there is implausible.
func TestHeartbeatAtNextImplausible(t *testing.T) {
	group := newGroup()
	r := listenT(t, group, Config{})
	from := r.local
	from.QPN ^= 0x1111
	inject(r, dataDG(92, 0, 0, 0, 1, []byte("m0")), from) // unread: next 0, message 0
	before := r.Stats().Implausible
	inject(r, heartbeatDG(92, 0, 3, 0, 0), from)
	require.Equal(t, before+1, r.Stats().Implausible, "position next in message 3; stats %+v", r.Stats())
}
