//go:build linux

package soft

import (
	"encoding/binary"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// RoCEv2 wire constants.
const (
	// UDPPort is the RoCEv2 UDP destination port.
	UDPPort = 4791

	BTHSize   = 12 // Base Transport Header
	DETHSize  = 8  // Datagram Extended Transport Header
	ImmDtSize = 4  // Immediate Data extended header
	ICRCSize  = 4  // Invariant CRC

	// OpUDSendOnly and OpUDSendOnlyImm are the only BTH opcodes a UD QP
	// accepts here.
	OpUDSendOnly    = 0x64
	OpUDSendOnlyImm = 0x65

	bthSE     = 0x80 // solicited event
	bthM      = 0x40 // migration request
	bthPadSh  = 4    // PadCnt is bits 4-5 of the flags byte
	bthTVerMk = 0x0f // transport header version, low 4 bits

	pkeyFull    = 0xFFFF
	pkeyLimited = 0x7FFF

	// hdrSize is BTH+DETH, the headers every UD SEND_ONLY carries.
	hdrSize = BTHSize + DETHSize
	// maxHdrSize adds ImmDt.
	maxHdrSize = hdrSize + ImmDtSize
	// minDatagram is the shortest valid UDP payload: BTH, DETH, ICRC.
	minDatagram = hdrSize + ICRCSize
)

// Header is a decoded UD SEND_ONLY[/WITH_IMMEDIATE] header: BTH, DETH and
// the optional ImmDt.
type Header struct {
	Opcode  uint8
	SE      bool // BTH solicited event
	M       bool // BTH migration request
	PadCnt  uint8
	TVer    uint8
	PKey    uint16
	DestQPN uint32 // 24 bits
	AckReq  bool   // BTH A bit (ignored on receive)
	PSN     uint32 // 24 bits
	QKey    uint32 // DETH
	SrcQPN  uint32 // DETH, 24 bits
	Imm     uint32 // ImmDt, valid when Opcode is OpUDSendOnlyImm
}

// HasImm reports whether the opcode carries ImmDt.
func (h *Header) HasImm() bool { return h.Opcode == OpUDSendOnlyImm }

// Len is the size of the encoded headers: BTH+DETH[+ImmDt].
func (h *Header) Len() int {
	if h.HasImm() {
		return maxHdrSize
	}
	return hdrSize
}

// PadFor returns the BTH PadCnt for a payload of n bytes: (-n)&3.
func PadFor(n int) int { return -n & 3 }

// Encode writes BTH, DETH and ImmDt (when the opcode has it) to b and
// returns the bytes written. b must hold Len() bytes.
func (h *Header) Encode(b []byte) int {
	_ = b[hdrSize-1]
	flags := h.PadCnt&3<<bthPadSh | h.TVer&bthTVerMk
	if h.SE {
		flags |= bthSE
	}
	if h.M {
		flags |= bthM
	}
	b[0] = h.Opcode
	b[1] = flags
	binary.BigEndian.PutUint16(b[2:], h.PKey)
	binary.BigEndian.PutUint32(b[4:], h.DestQPN&0xFFFFFF) // byte 4 reserved, zero
	psn := h.PSN & 0xFFFFFF
	if h.AckReq {
		psn |= 1 << 31
	}
	binary.BigEndian.PutUint32(b[8:], psn)
	binary.BigEndian.PutUint32(b[12:], h.QKey)
	binary.BigEndian.PutUint32(b[16:], h.SrcQPN&0xFFFFFF) // byte 16 reserved
	if h.HasImm() {
		binary.BigEndian.PutUint32(b[20:], h.Imm)
		return maxHdrSize
	}
	return hdrSize
}

// DropReason says why a received packet was dropped.
type DropReason uint8

const (
	Accepted      DropReason = iota
	DropTruncated            // shorter than its headers and ICRC
	DropBadTVer              // BTH TVer not 0
	DropBadOpcode            // not UD SEND_ONLY[/WITH_IMMEDIATE]
	DropBadPKey              // P_Key neither 0xFFFF nor 0x7FFF
	DropBadQKey              // DETH Q_Key not the QP's
	DropBadICRC              // ICRC does not match
	DropBadPad               // PadCnt longer than the payload
	DropNotForUs             // dest QPN not ours, or a group not joined
	DropTooLong              // does not fit the posted receive buffer
	DropSelf                 // own multicast looped back, blocked on request
	numDropReasons
)

var dropNames = [numDropReasons]string{
	Accepted:      "accepted",
	DropTruncated: verbs.DropTruncated,
	DropBadTVer:   verbs.DropBadTVer,
	DropBadOpcode: verbs.DropBadOpcode,
	DropBadPKey:   verbs.DropBadPKey,
	DropBadQKey:   verbs.DropBadQKey,
	DropBadICRC:   verbs.DropBadICRC,
	DropBadPad:    verbs.DropBadPad,
	DropNotForUs:  verbs.DropNotForUs,
	DropTooLong:   verbs.DropTooLong,
	DropSelf:      verbs.DropOwnLoopback,
}

func (r DropReason) String() string {
	if r < numDropReasons {
		return dropNames[r]
	}
	return "unknown drop reason"
}

// decodeHeaders decodes BTH and DETH from b (at least hdrSize bytes) for a
// datagram (UDP payload) of n bytes and checks what the headers alone can:
// length, TVer, opcode, P_Key and pad. It does not read ImmDt.
func decodeHeaders(b []byte, n int, h *Header) DropReason {
	if n < minDatagram || len(b) < hdrSize {
		return DropTruncated
	}
	h.Opcode = b[0]
	flags := b[1]
	h.SE = flags&bthSE != 0
	h.M = flags&bthM != 0
	h.PadCnt = flags >> bthPadSh & 3
	h.TVer = flags & bthTVerMk
	h.PKey = binary.BigEndian.Uint16(b[2:])
	h.DestQPN = binary.BigEndian.Uint32(b[4:]) & 0xFFFFFF
	psn := binary.BigEndian.Uint32(b[8:])
	h.AckReq = psn>>31 != 0
	h.PSN = psn & 0xFFFFFF
	h.QKey = binary.BigEndian.Uint32(b[12:])
	h.SrcQPN = binary.BigEndian.Uint32(b[16:]) & 0xFFFFFF
	h.Imm = 0
	if h.TVer != 0 {
		return DropBadTVer
	}
	switch h.Opcode {
	case OpUDSendOnly:
	case OpUDSendOnlyImm:
		if n < minDatagram+ImmDtSize {
			return DropTruncated
		}
	default:
		return DropBadOpcode
	}
	if h.PKey != pkeyFull && h.PKey != pkeyLimited {
		return DropBadPKey
	}
	if n-h.Len()-ICRCSize < int(h.PadCnt) {
		return DropBadPad
	}
	return Accepted
}

// payloadLen is the payload length of a datagram of n bytes whose headers
// decoded as h.
func (h *Header) payloadLen(n int) int {
	return n - h.Len() - int(h.PadCnt) - ICRCSize
}

// Decode decodes a whole RoCEv2 datagram (the UDP payload: BTH, DETH,
// [ImmDt], payload, pad, ICRC) into h and returns its payload. It checks
// everything the datagram alone tells: length, TVer, opcode, P_Key and
// PadCnt. The Q_Key, the destination and the ICRC (which covers the IP and
// UDP headers too) are checked by the receiving QP, or by CheckIPv4 for a
// whole IP packet. On a drop the payload is nil.
func Decode(dgram []byte, h *Header) ([]byte, DropReason) {
	if r := decodeHeaders(dgram, len(dgram), h); r != Accepted {
		return nil, r
	}
	off := hdrSize
	if h.HasImm() {
		h.Imm = binary.BigEndian.Uint32(dgram[hdrSize:])
		off += ImmDtSize
	}
	return dgram[off : off+h.payloadLen(len(dgram))], Accepted
}

// Filter is what a receiving QP accepts: datagrams for its QPN, or for
// the multicast QPN sent to one of its groups, with its Q_Key.
type Filter struct {
	QPN    uint32
	QKey   uint32
	Groups [][4]byte // IPv4 groups joined as a full member
}

// CheckIPv4 validates a whole IPv4 packet (header without options, UDP,
// RoCEv2 datagram) as a QP with filter f would, seeing the whole IP
// header, so the ICRC is verified plainly. It returns the payload, or nil
// and why the packet is dropped.
func CheckIPv4(pkt []byte, f *Filter, h *Header) ([]byte, DropReason) {
	if len(pkt) < ipv4HdrSize+udpHdrSize || pkt[0] != 0x45 || pkt[9] != 17 {
		return nil, DropTruncated
	}
	ipLen := int(binary.BigEndian.Uint16(pkt[2:]))
	udpLen := int(binary.BigEndian.Uint16(pkt[ipv4HdrSize+4:]))
	if ipLen != len(pkt) || udpLen != len(pkt)-ipv4HdrSize {
		return nil, DropTruncated
	}
	if binary.BigEndian.Uint16(pkt[ipv4HdrSize+2:]) != UDPPort {
		return nil, DropNotForUs
	}
	dgram := pkt[ipv4HdrSize+udpHdrSize:]
	payload, r := Decode(dgram, h)
	if r != Accepted {
		return nil, r
	}
	dst := [4]byte(pkt[16:20])
	switch {
	case h.DestQPN == f.QPN:
	case h.DestQPN == 0xFFFFFF && dst[0]&0xF0 == 0xE0:
		joined := false
		for _, g := range f.Groups {
			joined = joined || g == dst
		}
		if !joined {
			return nil, DropNotForUs
		}
	default:
		return nil, DropNotForUs
	}
	if h.QKey != f.QKey {
		return nil, DropBadQKey
	}
	if !VerifyICRC(pkt) {
		return nil, DropBadICRC
	}
	return payload, Accepted
}
