package infiniband

import (
	"encoding/hex"
	"fmt"
	"net"
)

// LinkAddrLen is the length of an IPoIB hardware address (INFINIBAND_ALEN).
const LinkAddrLen = 20

// Flags of the first byte of an IPoIB hardware address. RFC 4391 reserves
// the byte; the kernel sets IPOIB_FLAGS_RC when the interface accepts
// connected mode (RFC 4755) and defines IPOIB_FLAGS_UC.
const (
	FlagRC byte = 0x80 // IPOIB_FLAGS_RC: connected mode (RC) supported
	FlagUC byte = 0x40 // IPOIB_FLAGS_UC: unreliable connected (unused by Linux)
)

// LinkAddr is an IPoIB hardware address (RFC 4391 section 9.1.1): one
// byte of flags, a 24-bit queue pair number and a 128-bit GID, 20 bytes
// in all. `ip link` prints one as 80:00:00:48:fe:80:00:...
type LinkAddr [LinkAddrLen]byte

// MakeLinkAddr builds an address from its fields; qpn keeps its low 24
// bits.
func MakeLinkAddr(flags byte, qpn uint32, gid GID) LinkAddr {
	var a LinkAddr
	a[0] = flags
	a[1], a[2], a[3] = byte(qpn>>16), byte(qpn>>8), byte(qpn)
	copy(a[4:], gid[:])
	return a
}

// ParseLinkAddr parses the colon form Linux prints: twenty two-digit hex
// bytes separated by colons (upper or lower case).
func ParseLinkAddr(s string) (LinkAddr, error) {
	var a LinkAddr
	if len(s) != 3*LinkAddrLen-1 {
		return a, fmt.Errorf("ipoib: bad IPoIB link address %q: want %d colon-separated hex bytes", s, LinkAddrLen)
	}
	for i := range a {
		p := s[3*i : 3*i+2]
		if i < LinkAddrLen-1 && s[3*i+2] != ':' {
			return a, fmt.Errorf("ipoib: bad IPoIB link address %q: want ':' at offset %d", s, 3*i+2)
		}
		if _, err := hex.Decode(a[i:i+1], []byte(p)); err != nil {
			return LinkAddr{}, fmt.Errorf("ipoib: bad IPoIB link address %q: byte %d %q is not hex", s, i, p)
		}
	}
	return a, nil
}

// LinkAddrFromHardware converts a net.HardwareAddr (as net.Interface
// reports an IPoIB interface's) to a LinkAddr.
func LinkAddrFromHardware(hw net.HardwareAddr) (LinkAddr, error) {
	var a LinkAddr
	if len(hw) != LinkAddrLen {
		return a, fmt.Errorf("ipoib: hardware address %v has %d bytes, want %d", hw, len(hw), LinkAddrLen)
	}
	copy(a[:], hw)
	return a, nil
}

// String returns the colon form, lower case, as `ip link` prints it.
func (a LinkAddr) String() string {
	return net.HardwareAddr(a[:]).String()
}

// Flags returns the first byte.
func (a LinkAddr) Flags() byte { return a[0] }

// Connected reports whether the address advertises connected mode.
func (a LinkAddr) Connected() bool { return a[0]&FlagRC != 0 }

// QPN returns the 24-bit queue pair number.
func (a LinkAddr) QPN() uint32 { return uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3]) }

// GID returns the port GID, or for a multicast address the MGID.
func (a LinkAddr) GID() GID { return GID(a[4:]) }

// MGID is GID, for code that reads better asking a multicast address
// for its MGID.
func (a LinkAddr) MGID() MGID { return a.GID() }

// IsMulticast reports whether the address names a multicast group: QPN
// 0xffffff and an ff00::/8 GID.
func (a LinkAddr) IsMulticast() bool { return a.QPN() == MulticastQPN && a[4] == 0xff }
