package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf8"
)

// The wire format of a chat datagram, version 1. Every datagram is one UD
// message, so it is at most Conn.MTU() bytes; multi-byte fields are big
// endian.
//
//	offset size field
//	0      2    magic "RC" (rdmanet chat)
//	2      1    version (1)
//	3      1    type: 1 hello, 2 msg, 3 heartbeat, 4 bye
//	4      8    session: the sender's id, random per process (never 0)
//	12     4    seq: a msg's own number (1, 2, 3, ...); in every other
//	            type the number of the last msg sent (0: none yet), so
//	            receivers learn of trailing losses without waiting for
//	            the next msg
//	16     2    heartbeat interval in milliseconds: the sender promises a
//	            datagram at least this often, and receivers time it out
//	            after a few intervals of silence
//	18     1    nick length n (1..maxNick)
//	19     n    nick, UTF-8
//	19+n   2    text length m (0 unless type is msg)
//	21+n   m    text, UTF-8
//
// Nothing follows the text: a datagram with trailing bytes is malformed.
const (
	magic0, magic1 = 'R', 'C'
	version        = 1
	fixedHeader    = 2 + 1 + 1 + 8 + 4 + 2 + 1 // up to the nick
	maxNick        = 32
)

// Type says what a datagram is.
type Type uint8

// Datagram types.
const (
	Hello     Type = 1 // joined the group
	Msg       Type = 2 // a line of chat
	Heartbeat Type = 3 // still here
	Bye       Type = 4 // leaving the group
)

func (t Type) String() string {
	switch t {
	case Hello:
		return "hello"
	case Msg:
		return "msg"
	case Heartbeat:
		return "heartbeat"
	case Bye:
		return "bye"
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Packet is a decoded chat datagram.
type Packet struct {
	Type     Type
	Session  uint64
	Seq      uint32
	Interval uint16 // heartbeat interval, ms
	Nick     string
	Text     string
}

// Decoding errors.
var (
	ErrShort     = errors.New("chat: datagram too short")
	ErrMagic     = errors.New("chat: not a chat datagram")
	ErrVersion   = errors.New("chat: unsupported protocol version")
	ErrType      = errors.New("chat: unknown datagram type")
	ErrMalformed = errors.New("chat: malformed datagram")
)

// headerLen is the size of everything but the text for a nick.
func headerLen(nick string) int { return fixedHeader + len(nick) + 2 }

// MaxText is the longest text (in bytes) that fits one datagram of mtu
// bytes with this nick.
func MaxText(mtu int, nick string) int {
	n := mtu - headerLen(nick)
	if n < 0 {
		return 0
	}
	return min(n, 0xFFFF)
}

// ValidNick reports why a nick cannot be used, or nil.
func ValidNick(nick string) error {
	switch {
	case nick == "":
		return errors.New("empty nick")
	case len(nick) > maxNick:
		return fmt.Errorf("nick %q is longer than %d bytes", nick, maxNick)
	case !utf8.ValidString(nick):
		return fmt.Errorf("nick %q is not UTF-8", nick)
	}
	for _, r := range nick {
		if r <= ' ' || r == 0x7F || (r >= 0x80 && r < 0xA0) {
			return fmt.Errorf("nick %q has spaces or control characters", nick)
		}
	}
	return nil
}

// Append encodes p onto b. It checks what a receiver checks, so nothing
// undecodable leaves.
func (p *Packet) Append(b []byte) ([]byte, error) {
	if p.Type < Hello || p.Type > Bye {
		return b, ErrType
	}
	if p.Session == 0 {
		return b, errors.New("chat: session 0")
	}
	if err := ValidNick(p.Nick); err != nil {
		return b, fmt.Errorf("chat: %w", err)
	}
	if p.Type != Msg && p.Text != "" {
		return b, fmt.Errorf("chat: a %s carries no text", p.Type)
	}
	if len(p.Text) > 0xFFFF || !utf8.ValidString(p.Text) {
		return b, fmt.Errorf("chat: text is too long or not UTF-8")
	}
	b = append(b, magic0, magic1, version, byte(p.Type))
	b = binary.BigEndian.AppendUint64(b, p.Session)
	b = binary.BigEndian.AppendUint32(b, p.Seq)
	b = binary.BigEndian.AppendUint16(b, p.Interval)
	b = append(b, byte(len(p.Nick)))
	b = append(b, p.Nick...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(p.Text)))
	b = append(b, p.Text...)
	return b, nil
}

// Decode parses one datagram. It never reads past b and accepts exactly
// what Append produces.
func Decode(b []byte) (Packet, error) {
	var p Packet
	if len(b) < 4 {
		return p, ErrShort
	}
	if b[0] != magic0 || b[1] != magic1 {
		return p, ErrMagic
	}
	if b[2] != version {
		return p, fmt.Errorf("%w %d (this chat speaks %d)", ErrVersion, b[2], version)
	}
	if len(b) < fixedHeader {
		return p, ErrShort
	}
	p.Type = Type(b[3])
	if p.Type < Hello || p.Type > Bye {
		return p, fmt.Errorf("%w %d", ErrType, b[3])
	}
	p.Session = binary.BigEndian.Uint64(b[4:])
	p.Seq = binary.BigEndian.Uint32(b[12:])
	p.Interval = binary.BigEndian.Uint16(b[16:])
	n := int(b[18])
	rest := b[fixedHeader:]
	if len(rest) < n+2 {
		return p, ErrShort
	}
	p.Nick = string(rest[:n])
	rest = rest[n:]
	m := int(binary.BigEndian.Uint16(rest))
	rest = rest[2:]
	if len(rest) != m {
		return p, fmt.Errorf("%w: text length %d, %d bytes follow", ErrMalformed, m, len(rest))
	}
	p.Text = string(rest)
	switch {
	case p.Session == 0:
		return p, fmt.Errorf("%w: session 0", ErrMalformed)
	case ValidNick(p.Nick) != nil:
		return p, fmt.Errorf("%w: %v", ErrMalformed, ValidNick(p.Nick))
	case p.Type != Msg && m != 0:
		return p, fmt.Errorf("%w: a %s with text", ErrMalformed, p.Type)
	case !utf8.ValidString(p.Text):
		return p, fmt.Errorf("%w: text is not UTF-8", ErrMalformed)
	}
	return p, nil
}
