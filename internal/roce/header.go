package roce

import "encoding/binary"

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

	// HdrSize is BTH+DETH, the headers every UD SEND_ONLY carries.
	HdrSize = BTHSize + DETHSize
	// MaxHdrSize adds ImmDt.
	MaxHdrSize = HdrSize + ImmDtSize
	// minDatagram is the shortest valid UDP payload: BTH, DETH, ICRC.
	minDatagram = HdrSize + ICRCSize
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
		return MaxHdrSize
	}
	return HdrSize
}

// PadFor returns the BTH PadCnt for a payload of n bytes: (-n)&3.
func PadFor(n int) int { return -n & 3 }

// Encode writes BTH, DETH and ImmDt (when the opcode has it) to b and
// returns the bytes written. b must hold Len() bytes.
func (h *Header) Encode(b []byte) int {
	_ = b[HdrSize-1]
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
		return MaxHdrSize
	}
	return HdrSize
}

// DecodeHeaders decodes BTH and DETH from b (at least HdrSize bytes) for a
// datagram (UDP payload) of n bytes and checks what the headers alone can:
// length, TVer, opcode, P_Key and pad. It does not read ImmDt.
func DecodeHeaders(b []byte, n int, h *Header) DropReason {
	if n < minDatagram || len(b) < HdrSize {
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

// PayloadLen is the payload length of a datagram of n bytes whose headers
// decoded as h.
func (h *Header) PayloadLen(n int) int {
	return n - h.Len() - int(h.PadCnt) - ICRCSize
}

// Decode decodes a whole RoCEv2 datagram (the UDP payload: BTH, DETH,
// [ImmDt], payload, pad, ICRC) into h and returns its payload. It checks
// everything the datagram alone tells: length, TVer, opcode, P_Key and
// PadCnt. The Q_Key, the destination and the ICRC (which covers the IP and
// UDP headers too) are checked by the receiving QP, or by CheckIPv4 for a
// whole IP packet. On a drop the payload is nil.
func Decode(dgram []byte, h *Header) ([]byte, DropReason) {
	if r := DecodeHeaders(dgram, len(dgram), h); r != Accepted {
		return nil, r
	}
	off := HdrSize
	if h.HasImm() {
		h.Imm = binary.BigEndian.Uint32(dgram[HdrSize:])
		off += ImmDtSize
	}
	return dgram[off : off+h.PayloadLen(len(dgram))], Accepted
}
