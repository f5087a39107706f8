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
	if isIPv4GRH(buf) {
		t.Fatal("isIPv4GRH = true for an IPv6 GRH")
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
	other := sgid
	other[15] ^= 1
	if isOwnMulticast(buf, other) {
		t.Error("isOwnMulticast(another SGID) = true")
	}
}
