package reliable

import (
	"encoding/binary"
	"errors"
)

// The wire format is documented in doc.go ("Wire format").

const (
	version   = 1
	headerLen = 28

	hbPayload     = 16 // heartbeat: low seq, low msg
	nakPayload    = 12 // NAK: target session, count, RTT; then padding
	statusPayload = 12 // status: target session, limit
)

// kind is a datagram's type: the low nibble of byte 0.
type kind uint8

const (
	kindData      kind = 1 // a message fragment (new or a repair)
	kindHeartbeat kind = 2 // the sender's position, when it is idle
	kindNAK       kind = 3 // a receiver asks for datagrams (unicast)
	kindStatus    kind = 4 // a receiver's position (unicast)
	kindLost      kind = 5 // the sender no longer holds what was asked (unicast)
)

func (k kind) String() string {
	switch k {
	case kindData:
		return "data"
	case kindHeartbeat:
		return "heartbeat"
	case kindNAK:
		return "nak"
	case kindStatus:
		return "status"
	case kindLost:
		return "lost"
	}
	return "unknown"
}

// Flags, byte 1.
const (
	flagRepair  = 1 << 0 // data: a retransmission
	flagFlowMin = 1 << 1 // data, heartbeat: the sender runs "min" flow control
	flagFin     = 1 << 2 // heartbeat: the sender is closing
	// heartbeat: a write waits for the receivers' status (FlowMin); the
	// bit of flagRepair, which only data carries
	flagWait = 1 << 0
	// data: sent in the sender's start (send.go: starting); the bit of
	// flagFin, which only heartbeats carry. A heartbeat says the same
	// with hbStart in its fragment index.
	flagStart  = 1 << 2
	flagsKnown = flagRepair | flagFlowMin | flagFin

	hbStart = 1 // a heartbeat's fragment index in the sender's start
)

// header is the decoded fixed header of every datagram.
type header struct {
	kind    kind
	flags   uint8
	frag    uint16 // data: index of this fragment in its message
	nfrag   uint16 // data: fragments in the message (>= 1)
	tx      uint16 // data, heartbeat: the sender's transmission number; NAK: the last one heard
	session uint32 // the session of the endpoint that sent the datagram
	seq     uint64
	msg     uint64
}

// Decode errors: each is counted (Stats.Malformed) and the datagram dropped.
var (
	errShort    = errors.New("reliable: datagram shorter than the header")
	errVersion  = errors.New("reliable: unknown version")
	errKind     = errors.New("reliable: unknown kind")
	errFlags    = errors.New("reliable: unknown flags")
	errReserved = errors.New("reliable: reserved bytes not zero")
	errFragment = errors.New("reliable: fragment index out of range")
	errPayload  = errors.New("reliable: payload length wrong for the kind")
)

// putHeader writes h into b[:headerLen].
func putHeader(b []byte, h *header) {
	p := (*[headerLen]byte)(b) // one bounds check, for the header's length
	p[0] = version<<4 | uint8(h.kind)
	p[1] = h.flags
	binary.BigEndian.PutUint16(p[2:], h.frag)
	binary.BigEndian.PutUint16(p[4:], h.nfrag)
	binary.BigEndian.PutUint16(p[6:], h.tx)
	binary.BigEndian.PutUint32(p[8:], h.session)
	binary.BigEndian.PutUint64(p[12:], h.seq)
	binary.BigEndian.PutUint64(p[20:], h.msg)
}

// Accessors of one field of an encoded header, in place: the receive
// and send windows keep datagrams as they came or went, header included,
// and read or rewrite a field without decoding the rest. b holds at least
// headerLen bytes.

// fragOf returns the fragment index of data datagram b.
func fragOf(b []byte) uint16 { return binary.BigEndian.Uint16(b[2:]) }

// nfragOf returns how many fragments the message of data datagram b has.
func nfragOf(b []byte) uint16 { return binary.BigEndian.Uint16(b[4:]) }

// sessionOf returns the session of the endpoint that sent b.
func sessionOf(b []byte) uint32 { return binary.BigEndian.Uint32(b[8:]) }

// msgOf returns the message number of data datagram b.
func msgOf(b []byte) uint64 { return binary.BigEndian.Uint64(b[20:]) }

// markRepair flags data datagram b as a retransmission.
func markRepair(b []byte) { b[1] |= flagRepair }

// endStart clears a data datagram's start marker (flagStart).
func endStart(b []byte) { b[1] &^= flagStart }

// setTx rewrites the transmission number of b.
func setTx(b []byte, tx uint16) { binary.BigEndian.PutUint16(b[6:], tx) }

// keyed reports whether b carries a trailer (Config.Key, auth.go).
func keyed(b []byte) bool { return b[1]&flagKeyed != 0 }

// setKeyed sets or clears b's flagKeyed.
func setKeyed(b []byte, on bool) {
	if on {
		b[1] |= flagKeyed
	} else {
		b[1] &^= flagKeyed
	}
}

// decode parses a datagram's header and checks it against its kind; it
// returns the payload. It never panics and allocates nothing.
func decode(b []byte, h *header) ([]byte, error) {
	if len(b) < headerLen {
		return nil, errShort
	}
	if b[0]>>4 != version {
		return nil, errVersion
	}
	h.kind = kind(b[0] & 0x0f)
	h.flags = b[1]
	h.frag = binary.BigEndian.Uint16(b[2:])
	h.nfrag = binary.BigEndian.Uint16(b[4:])
	h.tx = binary.BigEndian.Uint16(b[6:])
	h.session = binary.BigEndian.Uint32(b[8:])
	h.seq = binary.BigEndian.Uint64(b[12:])
	h.msg = binary.BigEndian.Uint64(b[20:])
	known := uint8(flagsKnown)
	if h.kind == kindData || h.kind == kindHeartbeat {
		known |= flagsGSize // the sender's group size (feedback.go)
	}
	if h.flags&^known != 0 {
		return nil, errFlags
	}
	p := b[headerLen:]
	want := -1
	switch h.kind {
	case kindData:
		if h.nfrag == 0 || h.frag >= h.nfrag || uint64(h.frag) > h.seq {
			return nil, errFragment
		}
		return p, nil
	case kindHeartbeat:
		want = hbPayload
	case kindNAK:
		// Padded: a NAK pays for the repairs it asks for (nakPays).
		p = p[:min(len(p), nakPayload)]
		want = nakPayload
	case kindStatus:
		want = statusPayload
	case kindLost:
		want = 0
	default:
		return nil, errKind
	}
	if h.tx != 0 && (h.kind == kindStatus || h.kind == kindLost) {
		return nil, errReserved
	}
	if h.nfrag != 0 || (h.frag != 0 && (h.kind != kindHeartbeat || h.frag != hbStart)) {
		return nil, errFragment
	}
	if len(p) != want {
		return nil, errPayload
	}
	return p, nil
}

// start reports whether h, data or a heartbeat, was sent in its sender's
// start: a receiver that has not placed the sender starts it at its
// first datagram, seq 0.
func (h *header) start() bool {
	switch h.kind {
	case kindData:
		return h.flags&flagStart != 0
	case kindHeartbeat:
		return h.frag == hbStart
	}
	return false
}

// heartbeat payload: the first sequence the sender still holds that starts
// a message, and that message's number.
func putHeartbeat(p []byte, lowSeq, lowMsg uint64) {
	binary.BigEndian.PutUint64(p, lowSeq)
	binary.BigEndian.PutUint64(p[8:], lowMsg)
}

func parseHeartbeat(p []byte) (lowSeq, lowMsg uint64) {
	return binary.BigEndian.Uint64(p), binary.BigEndian.Uint64(p[8:])
}

// NAK payload: the session of the sender asked, how many datagrams from
// the header's seq, and the receiver's smoothed round trip in nanoseconds
// (with UnicastRepair the sender holds off repeating a repair for twice
// that long). The header's tx echoes the last transmission number heard.
func putNAK(p []byte, target, count, rttNanos uint32) {
	binary.BigEndian.PutUint32(p, target)
	binary.BigEndian.PutUint32(p[4:], count)
	binary.BigEndian.PutUint32(p[8:], rttNanos)
}

func parseNAK(p []byte) (target, count, rttNanos uint32) {
	return binary.BigEndian.Uint32(p), binary.BigEndian.Uint32(p[4:]), binary.BigEndian.Uint32(p[8:])
}

// status payload: the session of the sender, and one past the last seq
// the receiver has room for.
func putStatus(p []byte, target uint32, limit uint64) {
	binary.BigEndian.PutUint32(p, target)
	binary.BigEndian.PutUint64(p[4:], limit)
}

func parseStatus(p []byte) (target uint32, limit uint64) {
	return binary.BigEndian.Uint32(p), binary.BigEndian.Uint64(p[4:])
}

// nakPays is how many bytes of repairs a NAK may cause per byte of its
// own, as QUIC bounds what a server sends to an address it has not
// validated: a receiver pads its NAK to an eighth of the most its
// datagrams could take (nakLen), and a sender answers a NAK with at most
// nakPays times its length, whatever it asks for (sender.nak). A forged
// NAK so costs its sender an eighth of what it makes the group receive.
const nakPays = 8

// nakLen returns how long a NAK for count datagrams must be, its trailer
// included, when a datagram may be mtu bytes long; capped at mtu.
func nakLen(count uint64, mtu int) int {
	n := (count*uint64(mtu) + nakPays - 1) / nakPays
	return int(min(max(n, headerLen+nakPayload), uint64(mtu)))
}
