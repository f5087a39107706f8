//go:build linux

package soft

import (
	"net"
	"testing"
)

// A netdev with a MAC has the MAC's EUI-64 as its node GUID: the
// universal/local bit flipped, FF FE in the middle.
func TestNodeGUIDIsEUI64(t *testing.T) {
	ifi := &net.Interface{Name: "eth9", HardwareAddr: net.HardwareAddr{0x52, 0x54, 0x00, 0x12, 0x34, 0x56}}
	if got, want := nodeGUID(ifi), uint64(0x505400FFFE123456); got != want {
		t.Errorf("nodeGUID(52:54:00:12:34:56) = %#x, want %#x", got, want)
	}
	// No MAC (lo): a hash of the name, another name's another.
	lo, other := &net.Interface{Name: "lo"}, &net.Interface{Name: "lo2"}
	if nodeGUID(lo) == nodeGUID(other) {
		t.Errorf("nodeGUID without a MAC: lo and lo2 both %#x", nodeGUID(lo))
	}
}

// A port's largest MTU is RoCE's, 4096, whatever the netdev's.
func TestPortMaxMTU(t *testing.T) {
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Fatalf("lo: %v", err)
	}
	if got := portAttr(lo).MaxMTU; got != 4096 {
		t.Errorf("MaxMTU = %d, want 4096", got)
	}
}
