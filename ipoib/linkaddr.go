package ipoib

import (
	"net"

	"github.com/go-rdma/rdmanet/internal/infiniband"
)

// LinkAddrLen is the length of an IPoIB hardware address (INFINIBAND_ALEN).
const LinkAddrLen = infiniband.LinkAddrLen

// Flags of the first byte of an IPoIB hardware address. RFC 4391 reserves
// the byte; the kernel sets IPOIB_FLAGS_RC when the interface accepts
// connected mode (RFC 4755) and defines IPOIB_FLAGS_UC.
const (
	FlagRC = infiniband.FlagRC // IPOIB_FLAGS_RC: connected mode (RC) supported
	FlagUC = infiniband.FlagUC // IPOIB_FLAGS_UC: unreliable connected (unused by Linux)
)

// LinkAddr is an IPoIB hardware address (RFC 4391 section 9.1.1): one
// byte of flags, a 24-bit queue pair number and a 128-bit GID, 20 bytes
// in all. `ip link` prints one as 80:00:00:48:fe:80:00:... Its methods:
// String (that colon form), Flags, Connected, QPN, GID, MGID and
// IsMulticast (QPN 0xffffff and an ff00::/8 GID).
type LinkAddr = infiniband.LinkAddr

// MakeLinkAddr builds an address from its fields; qpn keeps its low 24
// bits.
func MakeLinkAddr(flags byte, qpn uint32, gid GID) LinkAddr {
	return infiniband.MakeLinkAddr(flags, qpn, gid)
}

// ParseLinkAddr parses the colon form Linux prints: twenty two-digit hex
// bytes separated by colons (upper or lower case).
func ParseLinkAddr(s string) (LinkAddr, error) { return infiniband.ParseLinkAddr(s) }

// LinkAddrFromHardware converts a net.HardwareAddr (as net.Interface
// reports an IPoIB interface's) to a LinkAddr.
func LinkAddrFromHardware(hw net.HardwareAddr) (LinkAddr, error) {
	return infiniband.LinkAddrFromHardware(hw)
}
