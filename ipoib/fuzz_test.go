package ipoib

import (
	"testing"
)

func FuzzParseMGID(f *testing.F) {
	for _, s := range []string{
		"ff12:401b:ffff::f01:203", "::ffff:239.1.2.3", "ff0e::ffff:ef01:203",
		"ff12:401b:ffff:0000:0000:0000:ffff:ffff", "fe80::1%lo", "239.1.2.3", "", "::",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseMGID(s)
		if err != nil {
			return
		}
		for _, out := range []string{m.String(), m.StringExpanded()} {
			m2, err := ParseMGID(out)
			if err != nil {
				t.Fatalf("ParseMGID(%q) = %v, but its String %q does not parse: %v", s, m, out, err)
			}
			if m2 != m {
				t.Fatalf("round trip %q -> %q -> %v, want %v", s, out, m2, m)
			}
		}
		// The reverse mapping must not panic, and every exact IP origin
		// must map forward to the same MGID.
		for _, o := range m.Origins() {
			if o.Partial || !o.Group.IsValid() {
				continue
			}
			var fwd MGID
			switch o.Mapping {
			case MapIPoIB:
				fwd, err = IPoIBMGID(o.Group, o.PKey, o.Scope)
			case MapRDMACM, MapRDMACMSA:
				fwd, err = RDMACMMGID(o.Group, o.PKey, o.Scope)
			case MapRoCEv2, MapRoCEIPv6:
				fwd, err = RoCEv2MGID(o.Group)
			case MapRoCEv1:
				fwd, err = RoCEv1MGID(o.Group)
			default:
				continue
			}
			if o.Mapping == MapRDMACMSA && o.PKey&0x7fff == 0 {
				continue // the SA MGID's own P_Key field is not a parameter
			}
			if err != nil {
				t.Fatalf("origin %+v of %v does not map forward: %v", o, m, err)
			}
			if fwd != m {
				t.Fatalf("origin %+v of %v maps forward to %v", o, m, fwd)
			}
		}
	})
}

func FuzzParseLinkAddr(f *testing.F) {
	for _, s := range []string{
		"80:00:00:48:fe:80:00:00:00:00:00:00:00:02:c9:03:00:a1:b2:c1",
		"00:ff:ff:ff:ff:12:40:1b:ff:ff:00:00:00:00:00:00:ff:ff:ff:ff",
		"98:03:9b:12:34:56", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseLinkAddr(s)
		if err != nil {
			return
		}
		out := a.String()
		a2, err := ParseLinkAddr(out)
		if err != nil || a2 != a {
			t.Fatalf("round trip %q -> %q -> %v, %v", s, out, a2, err)
		}
		if b := MakeLinkAddr(a.Flags(), a.QPN(), a.GID()); b != a {
			t.Fatalf("fields of %v rebuild %v", a, b)
		}
	})
}
