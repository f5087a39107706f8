package infiniband

import (
	"net/netip"
	"testing"
)

// IsMulticast reads bytes; it must agree with netip's reading of the GID
// as an address: ff00::/8, or IPv4-mapped 224.0.0.0/4.
func TestGIDIsMulticast(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		gid  string
		want bool
	}{
		{"ff12:401b:ffff::f01:203", true},
		{"ff0e::ffff:ef01:203", true},
		{"ff02::1", true},
		{"::ffff:239.1.2.3", true},
		{"::ffff:224.0.0.0", true},
		{"::ffff:239.255.255.255", true},
		{"::ffff:223.255.255.255", false},
		{"::ffff:240.0.0.1", false},
		{"::ffff:10.0.0.1", false},
		{"::239.1.2.3", false},      // IPv4-compatible, not mapped
		{"::fffe:239.1.2.3", false}, // not 0xffff
		{"1::ffff:239.1.2.3", false},
		{"fe80::2:c903:a1:b2c1", false},
		{"::", false},
	} {
		g, err := ParseGID(tc.gid)
		if err != nil {
			t.Fatal(err)
		}
		a := netip.AddrFrom16(g)
		byAddr := a.Is6() && g[0] == 0xff || a.Is4In6() && a.Unmap().IsMulticast()
		if got := g.IsMulticast(); got != tc.want || got != byAddr {
			t.Errorf("%s: IsMulticast got %v, want %v (netip: %v)", tc.gid, got, tc.want, byAddr)
		}
	}
}

// The hot path asks IsMulticast of every *Addr it sends to.
func TestGIDIsMulticastAllocs(t *testing.T) {
	g := GIDFromIP(netip.MustParseAddr("239.1.2.3"))
	if n := testing.AllocsPerRun(100, func() { _ = g.IsMulticast() }); n != 0 {
		t.Errorf("IsMulticast allocates %v times, want 0", n)
	}
}

func BenchmarkGIDIsMulticast(b *testing.B) {
	gs := []GID{GIDFromIP(netip.MustParseAddr("239.1.2.3")), GIDFromIP(netip.MustParseAddr("10.0.0.1")),
		GIDFromIP(netip.MustParseAddr("fe80::1"))}
	n := 0
	for i := 0; b.Loop(); i++ {
		if gs[i%3].IsMulticast() {
			n++
		}
	}
	_ = n
}
