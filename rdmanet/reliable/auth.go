package reliable

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"sync/atomic"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// The authenticated mode (Config.Key): every datagram a keyed conn sends,
// of every kind, ends with a trailer
//
//	8 bytes   the conn's transmit counter: one more for each datagram it
//	          sends, to anyone (a repair is stamped anew, in place)
//	16 bytes  HMAC-SHA-256 under the key, truncated, over the header,
//	          the payload, the counter and the sending QP's number
//
// and a keyed conn drops, before anything else looks at it, every
// datagram whose tag is wrong (Stats.Unauthenticated) or whose counter it
// has seen from that QP and session, or that is too old to tell
// (Stats.Replayed): an anti-replay window per (QP, session), as IPsec's.
// The QP's number is in the tag because the window is kept per QP: a
// datagram replayed from another QP fails the tag.
const (
	// flagKeyed, in byte 1 of a keyed conn's every datagram, says that
	// the trailer follows. It is not among the flags an open conn knows
	// (flagsKnown): an open conn drops a keyed datagram as malformed
	// instead of reading the trailer as part of a message.
	flagKeyed = 1 << 3

	ctrLen     = 8
	tagLen     = 16
	trailerLen = ctrLen + tagLen
	minKey     = 16
	maxKey     = 64
)

// checkKey checks Config.Key's length.
func checkKey(key []byte) error {
	if n := len(key); n != 0 && (n < minKey || n > maxKey) {
		return fmt.Errorf("reliable: Config.Key is %d bytes, want %d to %d (or none)", n, minKey, maxKey)
	}
	return nil
}

// trailer is the bytes a datagram carries after its payload: 0 without a
// key.
func (c *Config) trailer() int {
	if len(c.Key) == 0 {
		return 0
	}
	return trailerLen
}

// authState is a keyed conn's: the transmit counter, and the receive
// side's key and anti-replay windows (used only under rx.io, by handle).
type authState struct {
	ctr     atomic.Uint64
	open    sealer
	windows map[replayKey]*replayWindow
	limit   int   // windows kept at most
	expire  int64 // a window not heard for this long may be dropped
}

// sealer is a pre-keyed HMAC and a buffer to sum into: one per goroutine
// that sends (the sender's, under s.mu; the receiver's, under r.mu) and
// one for receiving. Nothing is allocated per datagram.
type sealer struct {
	mac hash.Hash
	sum [sha256.Size]byte
	qpn [4]byte
}

func (s *sealer) init(key []byte) {
	s.mac = hmac.New(sha256.New, key)
}

// tag computes the tag of b (header, payload and counter) sent by QP qpn.
func (s *sealer) tag(b []byte, qpn uint32) []byte {
	s.mac.Reset()
	s.mac.Write(b)
	binary.BigEndian.PutUint32(s.qpn[:], qpn)
	s.mac.Write(s.qpn[:])
	return s.mac.Sum(s.sum[:0])[:tagLen]
}

func (c *Conn) initAuth() {
	if len(c.cfg.Key) == 0 {
		return
	}
	a := &authState{windows: make(map[replayKey]*replayWindow)}
	a.open.init(c.cfg.Key)
	a.limit = 4*c.cfg.MaxSenders + 64
	a.expire = 2 * int64(max(c.cfg.SenderTimeout, c.cfg.ReceiverTimeout))
	c.auth = a
	c.snd.seal.init(c.cfg.Key)
	c.rcv.seal.init(c.cfg.Key)
}

// seal stamps the trailer after the n bytes of datagram b (which has room
// for it) with the next transmit counter and returns the datagram's
// length; without a key it returns n.
func (c *Conn) seal(s *sealer, b []byte, n int) int {
	if c.auth == nil {
		return n
	}
	setKeyed(b, true)
	binary.BigEndian.PutUint64(b[n:], c.auth.ctr.Add(1))
	copy(b[n+ctrLen:], s.tag(b[:n+ctrLen], c.local.QPN))
	return n + trailerLen
}

// open checks a received datagram's trailer and returns the datagram
// without it; ok is false, and the datagram counted and to be dropped,
// when the tag is wrong or the counter replayed. now is the conn's clock.
func (c *Conn) open(b []byte, from rdmanet.Addr, now int64) ([]byte, bool) {
	a := c.auth
	if len(b) < headerLen+trailerLen || !keyed(b) {
		c.stats.unauthenticated.Add(1)
		return nil, false
	}
	n := len(b) - trailerLen
	if !hmac.Equal(a.open.tag(b[:n+ctrLen], from.QPN), b[n+ctrLen:]) {
		c.stats.unauthenticated.Add(1)
		return nil, false
	}
	ctr := binary.BigEndian.Uint64(b[n:])
	k := replayKey{qpn: from.QPN, session: sessionOf(b)}
	w := a.windows[k]
	if w == nil {
		if len(a.windows) >= a.limit {
			a.sweep(now)
		}
		if len(a.windows) >= a.limit {
			c.stats.foreign.Add(1)
			return nil, false
		}
		w = &replayWindow{}
		a.windows[k] = w
	}
	if !w.accept(ctr) {
		c.stats.replayed.Add(1)
		return nil, false
	}
	w.heard = now
	setKeyed(b, false)
	return b[:n], true
}

// sweep forgets the windows of QPs and sessions not heard for expire.
// (A recording of a session forgotten so replays as a new one: see
// doc.go, Authentication.)
func (a *authState) sweep(now int64) {
	for k, w := range a.windows {
		if now-w.heard > a.expire {
			delete(a.windows, k)
		}
	}
}

// replayKey names a source of datagrams: its QP and session.
type replayKey struct {
	qpn     uint32
	session uint32
}

// The anti-replay window: the highest counter accepted and a bitmap of
// the replayWords*64 counters up to it, kept as a ring of words
// (WireGuard's replay filter, RFC 6479): counters more than
// replayWindowLen below the highest are refused as too old to tell.
// Datagrams of one source reach a receiver a little out of order (the
// group's path and the unicast one, a NAK beside data); 1984 counters is
// far more than either path reorders.
const (
	replayWords     = 32
	replayWindowLen = (replayWords - 1) * 64
)

type replayWindow struct {
	top   uint64 // the highest counter accepted
	bits  [replayWords]uint64
	heard int64
}

// accept reports whether counter ctr is new, and records it.
func (w *replayWindow) accept(ctr uint64) bool {
	if ctr == 0 {
		return false // counters start at 1
	}
	word := ctr / 64
	switch {
	case ctr > w.top:
		cur := w.top / 64
		for i, d := uint64(1), min(word-cur, replayWords); i <= d; i++ {
			w.bits[(cur+i)%replayWords] = 0
		}
		w.top = ctr
	case w.top-ctr > replayWindowLen:
		return false
	}
	bit := uint64(1) << (ctr % 64)
	if w.bits[word%replayWords]&bit != 0 {
		return false
	}
	w.bits[word%replayWords] |= bit
	return true
}
