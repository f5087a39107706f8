package rdmanet

import (
	"testing"

	"github.com/go-rdma/rdmanet/ipoib"
)

// TestGRHGIDsIPv6 reads the GIDs of an IPv6 (or InfiniBand) GRH: the
// 40-byte header with the SGID at offset 8 and the DGID at 24, which the
// software backend over IPv4 never produces.
func TestGRHGIDsIPv6(t *testing.T) {
	buf := make([]byte, 40+8)
	buf[0] = 6 << 4 // IP version 6
	var sgid, dgid ipoib.GID
	for i := range sgid {
		sgid[i] = byte(0x10 + i)
		dgid[i] = byte(0x80 + i)
	}
	dgid[0] = 0xff // multicast
	copy(buf[8:], sgid[:])
	copy(buf[24:], dgid[:])
	checkIPv6GRH(t, buf, sgid, dgid, "an IPv6 GRH")
	other := sgid
	other[15] ^= 1
	if isOwnMulticast(buf, other) {
		t.Error("isOwnMulticast(another SGID) = true")
	}
}

// TestGRHIPv6SourceLooksLikeIPv4Header reads an IPv6 GRH whose byte 20,
// where an IPv4 header in the area's last 20 bytes has its version and
// length (0x45), happens to be 0x45: byte 12 of the SGID (fe80::4500:...
// is an ordinary link-local GID). The version nibble in byte 0 decides:
// it is an IPv6 header, and the GIDs are its 16-byte ones, not IPv4
// addresses read from the middle of the SGID and DGID.
func TestGRHIPv6SourceLooksLikeIPv4Header(t *testing.T) {
	buf := make([]byte, 40)
	buf[0] = 6<<4 | 0x0a // IP version 6, some traffic class bits
	var sgid, dgid ipoib.GID
	sgid[0], sgid[1] = 0xfe, 0x80
	for i := 8; i < 16; i++ {
		sgid[i] = byte(0x30 + i)
	}
	sgid[12] = 0x45 // buf[20]
	dgid[0], dgid[1] = 0xff, 0x12
	dgid[15] = 0x01
	copy(buf[8:], sgid[:])
	copy(buf[24:], dgid[:])
	if buf[20] != 0x45 {
		t.Fatalf("buf[20] = %#x, want 0x45 (the test's premise)", buf[20])
	}
	checkIPv6GRH(t, buf, sgid, dgid, "an IPv6 GRH whose byte 20 is 0x45")
}

// checkIPv6GRH checks that buf, described by what, reads as an IPv6 GRH
// from sgid to the multicast dgid: not IPv4, its GIDs at bytes 8 and 24,
// and multicast of its own.
func checkIPv6GRH(t *testing.T, buf []byte, sgid, dgid ipoib.GID, what string) {
	t.Helper()
	if isIPv4GRH(buf) {
		t.Fatalf("isIPv4GRH = true for %s", what)
	}
	if got := grhSGID(buf); got != sgid {
		t.Errorf("grhSGID = %v, want %v (bytes 8..23)", got, sgid)
	}
	if got := grhDGID(buf); got != dgid {
		t.Errorf("grhDGID = %v, want %v (bytes 24..39)", got, dgid)
	}
	if !isOwnMulticast(buf, sgid) {
		t.Error("isOwnMulticast(own SGID, multicast DGID) = false")
	}
}
