package ipoib

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Vectors worked out by hand from the kernel's ip_ib_mc_map and
// ipv6_ib_mc_map (include/net/ip.h, include/net/if_inet6.h), cma_set_mgid
// and cma_iboe_set_mgid (drivers/infiniband/core/cma.c) and RFC 4391.
var mgidVectors = []struct {
	name    string
	mapping Mapping
	group   string
	pkey    uint16
	scope   Scope
	want    string
}{
	{"ipoib default", MapIPoIB, "239.1.2.3", 0xffff, 2, "ff12:401b:ffff::f01:203"},
	{"ipoib all-hosts", MapIPoIB, "224.0.0.1", 0xffff, 2, "ff12:401b:ffff::1"},
	{"ipoib mdns", MapIPoIB, "224.0.0.251", 0xffff, 2, "ff12:401b:ffff::fb"},
	{"ipoib 28 bits", MapIPoIB, "239.255.255.250", 0xffff, 2, "ff12:401b:ffff::fff:fffa"},
	{"ipoib site scope", MapIPoIB, "239.1.2.3", 0xffff, ScopeSiteLocal, "ff15:401b:ffff::f01:203"},
	{"ipoib org scope", MapIPoIB, "239.1.2.3", 0xffff, ScopeOrgLocal, "ff18:401b:ffff::f01:203"},
	{"ipoib global scope", MapIPoIB, "239.1.2.3", 0xffff, ScopeGlobal, "ff1e:401b:ffff::f01:203"},
	{"ipoib limited member 0x7fff", MapIPoIB, "239.1.2.3", 0x7fff, 2, "ff12:401b:ffff::f01:203"},
	{"ipoib limited member 0x0001", MapIPoIB, "239.1.2.3", 0x0001, 2, "ff12:401b:8001::f01:203"},
	{"ipoib full member 0x8001", MapIPoIB, "239.1.2.3", 0x8001, 2, "ff12:401b:8001::f01:203"},
	{"ipoib ipv6 all-nodes", MapIPoIB, "ff02::1", 0xffff, 2, "ff12:601b:ffff::1"},
	{"ipoib ipv6 solicited-node", MapIPoIB, "ff02::1:ff12:3456", 0xffff, 2, "ff12:601b:ffff::1:ff12:3456"},
	{"ipoib ipv6 low 80 bits, group scope dropped", MapIPoIB, "ff15:1234:5678:9abc:def0:1:2:3", 0x8001, 2, "ff12:601b:8001:9abc:def0:1:2:3"},
	{"rdma_cm default", MapRDMACM, "239.1.2.3", 0xffff, 2, "ff12:4001:ffff::f01:203"},
	{"rdma_cm pkey scope", MapRDMACM, "224.1.1.1", 0x0002, ScopeGlobal, "ff1e:4001:8002::1:101"},
	{"rdma_cm ipv6", MapRDMACM, "ff02::1", 0xffff, 2, "ff12:6001:ffff::1"},
	{"rdma_cm SA-assigned verbatim", MapRDMACM, "ff15:a01b:ffff::1", 0x8001, 2, "ff15:a01b:ffff::1"},
	{"rdma_cm SA-assigned any scope", MapRDMACM, "ff1e:a01b:8001::5", 0xffff, 2, "ff1e:a01b:8001::5"},
	{"rdma_cm a01b without ff1x is mapped", MapRDMACM, "ff02:a01b::1", 0xffff, 2, "ff12:6001:ffff::1"},
	{"roce v2 ipv4", MapRoCEv2, "239.1.2.3", 0, 0, "::ffff:239.1.2.3"},
	{"roce v2 ipv6 verbatim", MapRoCEv2, "ff0e::1234", 0, 0, "ff0e::1234"},
	{"roce v1 ipv4", MapRoCEv1, "239.1.2.3", 0, 0, "ff0e::ffff:ef01:203"},
	{"roce v1 ipv6 verbatim", MapRoCEv1, "ff05::2", 0, 0, "ff05::2"},
}

func mapGroup(t *testing.T, m Mapping, group netip.Addr, pkey uint16, scope Scope) (MGID, error) {
	t.Helper()
	switch m {
	case MapIPoIB:
		return IPoIBMGID(group, pkey, scope)
	case MapRDMACM:
		return RDMACMMGID(group, pkey, scope)
	case MapRoCEv2:
		return RoCEv2MGID(group)
	case MapRoCEv1:
		return RoCEv1MGID(group)
	}
	t.Fatalf("no mapping %v", m)
	return MGID{}, nil
}

func TestMGIDVectors(t *testing.T) {
	t.Parallel()
	for _, v := range mgidVectors {
		t.Run(v.name, func(t *testing.T) {
			got, err := mapGroup(t, v.mapping, netip.MustParseAddr(v.group), v.pkey, v.scope)
			require.NoError(t, err)
			assert.Equal(t, v.want, got.String())
			want, err := ParseMGID(v.want)
			require.NoError(t, err)
			assert.Equal(t, want, got)
		})
	}
}

func TestRoCEv1Expanded(t *testing.T) {
	t.Parallel()
	m, err := RoCEv1MGID(netip.MustParseAddr("239.1.2.3"))
	require.NoError(t, err)
	assert.Equal(t, "ff0e:0000:0000:0000:0000:ffff:ef01:0203", m.StringExpanded())
}

// kernelIPIBMCMap transcribes ip_ib_mc_map and ipv6_ib_mc_map byte by
// byte, with cma_set_mgid's RDMA_PS_UDP byte, so the production code is
// checked against the kernel's own layout rather than against itself.
func kernelIPIBMCMap(group netip.Addr, broadcast LinkAddr, psUDP bool) MGID {
	var buf [20]byte
	scope := broadcast[5] & 0xf
	buf[0] = 0
	buf[1], buf[2], buf[3] = 0xff, 0xff, 0xff
	buf[4] = 0xff
	buf[5] = 0x10 | scope
	buf[7] = 0x1b
	buf[8] = broadcast[8]
	buf[9] = broadcast[9]
	if group.Is4() {
		a4 := group.As4()
		addr := binary.BigEndian.Uint32(a4[:])
		buf[6] = 0x40
		buf[19] = byte(addr)
		addr >>= 8
		buf[18] = byte(addr)
		addr >>= 8
		buf[17] = byte(addr)
		addr >>= 8
		buf[16] = byte(addr & 0x0f)
	} else {
		a := group.As16()
		buf[6] = 0x60
		copy(buf[10:], a[6:16])
	}
	if psUDP {
		buf[7] = 0x01
	}
	return MGID(buf[4:])
}

func TestMGIDAgainstKernelTranscription(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		pkey := uint16(r.UintN(0x10000))
		if pkey&0x7fff == 0 {
			continue
		}
		scope := Scope(r.UintN(16))
		bc, err := BroadcastAddr(pkey, scope)
		require.NoError(t, err)
		var group netip.Addr
		if i%2 == 0 {
			group = netip.AddrFrom4([4]byte{0xe0 | byte(r.UintN(16)), byte(r.UintN(256)), byte(r.UintN(256)), byte(r.UintN(256))})
		} else {
			var b [16]byte
			for j := range b {
				b[j] = byte(r.UintN(256))
			}
			b[0], b[1] = 0xff, 0x02 // not ff1x:a01b, so never an SA MGID
			group = netip.AddrFrom16(b)
		}
		got, err := IPoIBMGID(group, pkey, scope)
		require.NoError(t, err)
		require.Equal(t, kernelIPIBMCMap(group, bc, false), got, "IPoIB %s pkey %#x scope %d", group, pkey, scope)
		got, err = RDMACMMGID(group, pkey, scope)
		require.NoError(t, err)
		require.Equal(t, kernelIPIBMCMap(group, bc, true), got, "rdma_cm %s pkey %#x scope %d", group, pkey, scope)
	}
}

func TestBroadcast(t *testing.T) {
	t.Parallel()
	m, err := BroadcastMGID(DefaultPKey, DefaultScope)
	require.NoError(t, err)
	assert.Equal(t, "ff12:401b:ffff::ffff:ffff", m.String())
	m, err = BroadcastMGID(0x0001, ScopeSiteLocal)
	require.NoError(t, err)
	assert.Equal(t, "ff15:401b:8001::ffff:ffff", m.String())

	a, err := BroadcastAddr(DefaultPKey, DefaultScope)
	require.NoError(t, err)
	assert.Equal(t, "00:ff:ff:ff:ff:12:40:1b:ff:ff:00:00:00:00:00:00:ff:ff:ff:ff", a.String())
	assert.True(t, a.IsMulticast())
	assert.Equal(t, uint32(MulticastQPN), a.QPN())
	assert.Equal(t, uint16(0xffff), a.MGID().PKey())
	assert.Equal(t, ScopeLinkLocal, a.MGID().Scope())
}

func TestMappingErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		group netip.Addr
		pkey  uint16
		scope Scope
		want  string
	}{
		{"unicast v4", netip.MustParseAddr("10.0.0.1"), 0xffff, 2, "not a multicast address"},
		{"unicast v6", netip.MustParseAddr("fe80::1"), 0xffff, 2, "not a multicast address"},
		{"unspecified", netip.IPv4Unspecified(), 0xffff, 2, "not a multicast address"},
		{"no address", netip.Addr{}, 0xffff, 2, "no group address"},
		{"pkey zero", netip.MustParseAddr("239.1.2.3"), 0x0000, 2, "P_Key 0x0000"},
		{"pkey only member bit", netip.MustParseAddr("239.1.2.3"), 0x8000, 2, "P_Key 0x8000"},
		{"scope too big", netip.MustParseAddr("239.1.2.3"), 0xffff, 16, "scope 16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := IPoIBMGID(tc.group, tc.pkey, tc.scope)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			_, err = RDMACMMGID(tc.group, tc.pkey, tc.scope)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	_, err := RoCEv2MGID(netip.MustParseAddr("192.168.1.1"))
	assert.ErrorIs(t, err, ErrNotMulticast)
	_, err = RoCEv1MGID(netip.MustParseAddr("::1"))
	assert.ErrorIs(t, err, ErrNotMulticast)
	_, err = BroadcastMGID(0x8000, 2)
	assert.Error(t, err)
	_, err = EthernetMAC(netip.MustParseAddr("10.1.1.1"))
	assert.ErrorIs(t, err, ErrNotMulticast)
}

func TestMappedIPv4GroupIsUnmapped(t *testing.T) {
	t.Parallel()
	// A group given as ::ffff:239.1.2.3 (how net.IP stores IPv4) is the
	// IPv4 group.
	got, err := IPoIBMGID(netip.MustParseAddr("::ffff:239.1.2.3"), 0xffff, 2)
	require.NoError(t, err)
	assert.Equal(t, "ff12:401b:ffff::f01:203", got.String())
}

func TestEthernetMAC(t *testing.T) {
	t.Parallel()
	for group, want := range map[string]string{
		"239.1.2.3":           "01:00:5e:01:02:03",
		"239.129.2.3":         "01:00:5e:01:02:03", // only 23 bits reach the MAC
		"224.0.0.251":         "01:00:5e:00:00:fb",
		"ff02::1":             "33:33:00:00:00:01",
		"ff0e::ffff:ef01:203": "33:33:ef:01:02:03",
	} {
		got, err := EthernetMAC(netip.MustParseAddr(group))
		require.NoError(t, err)
		assert.Equal(t, want, got.String(), group)
	}
}

func TestOriginsReverseEveryVector(t *testing.T) {
	t.Parallel()
	for _, v := range mgidVectors {
		t.Run(v.name, func(t *testing.T) {
			m, err := ParseMGID(v.want)
			require.NoError(t, err)
			group := netip.MustParseAddr(v.group)
			var hit bool
			for _, o := range m.Origins() {
				if o.Mapping == MapRoCEIPv6 && v.mapping != MapRoCEv2 && v.mapping != MapRoCEv1 {
					continue
				}
				if o.Partial {
					g16, o16 := group.As16(), o.Group.As16()
					if [10]byte(g16[6:]) == [10]byte(o16[6:]) && o.Mapping == v.mapping {
						hit = true
					}
					continue
				}
				if o.Group == group {
					hit = true
					if o.Mapping == MapIPoIB || o.Mapping == MapRDMACM {
						assert.Equal(t, v.pkey|FullMember, o.PKey)
						assert.Equal(t, v.scope, o.Scope)
					}
				}
			}
			assert.True(t, hit, "no origin of %s gives %s: %+v", v.want, v.group, m.Origins())
		})
	}
}

func TestOrigins(t *testing.T) {
	t.Parallel()
	origins := func(s string) []Origin {
		t.Helper()
		m, err := ParseMGID(s)
		require.NoError(t, err)
		return m.Origins()
	}
	o := origins("ff12:401b:ffff::f01:203")
	require.Len(t, o, 2)
	assert.Equal(t, Origin{Mapping: MapIPoIB, Group: netip.MustParseAddr("239.1.2.3"), PKey: 0xffff, Scope: 2}, o[0])
	assert.Equal(t, MapRoCEIPv6, o[1].Mapping)

	o = origins("ff12:401b:8001::ffff:ffff")
	require.NotEmpty(t, o)
	assert.Equal(t, Origin{Mapping: MapBroadcast, PKey: 0x8001, Scope: 2}, o[0])

	o = origins("::ffff:239.1.2.3")
	require.Len(t, o, 1)
	assert.Equal(t, Origin{Mapping: MapRoCEv2, Group: netip.MustParseAddr("239.1.2.3")}, o[0])

	o = origins("ff0e::ffff:239.1.2.3")
	require.Len(t, o, 2)
	assert.Equal(t, Origin{Mapping: MapRoCEv1, Group: netip.MustParseAddr("239.1.2.3")}, o[0])

	o = origins("ff15:a01b:ffff::1")
	require.Len(t, o, 2)
	assert.Equal(t, MapRDMACMSA, o[0].Mapping)

	o = origins("ff12:601b:ffff::1")
	require.NotEmpty(t, o)
	assert.True(t, o[0].Partial)
	assert.Equal(t, "::1", o[0].Group.String())

	// Byte 12's high nibble set: not an IPv4 IPoIB group.
	o = origins("ff12:401b:ffff::1f01:203")
	require.Len(t, o, 1)
	assert.Equal(t, MapRoCEIPv6, o[0].Mapping)

	assert.Empty(t, origins("fe80::1"), "a unicast GID has no origin")
	assert.Empty(t, origins("::ffff:10.0.0.1"), "an IPv4-mapped unicast address has no origin")
}

func TestMGIDAccessors(t *testing.T) {
	t.Parallel()
	m, err := ParseMGID("ff15:4001:8001::f01:203")
	require.NoError(t, err)
	assert.Equal(t, ScopeSiteLocal, m.Scope())
	assert.Equal(t, uint16(0x8001), m.PKey())
	assert.Equal(t, SignatureCMv4, m.Signature())
	assert.True(t, m.IsMulticast())
	assert.False(t, m.IsZero())
	assert.True(t, MGID{}.IsZero())
	r, err := ParseMGID("::ffff:239.1.2.3")
	require.NoError(t, err)
	assert.True(t, r.IsMulticast(), "RoCE v2 IPv4 MGIDs are multicast")
	u, err := ParseMGID("::ffff:10.1.2.3")
	require.NoError(t, err)
	assert.False(t, u.IsMulticast())
	assert.Equal(t, "0x2 link-local", ScopeLinkLocal.String())
	assert.Equal(t, "0x3", Scope(3).String())
}

func TestOriginsRejectImpossiblePKeys(t *testing.T) {
	t.Parallel()
	// The kernel always sets the full-member bit: an MGID without it, or
	// with P_Key 0, cannot come from IPoIB or rdma_cm.
	for _, s := range []string{"ff12:401b:7fff::f01:203", "ff10:401b::", "ff12:4001:0001::1"} {
		m, err := ParseMGID(s)
		require.NoError(t, err)
		for _, o := range m.Origins() {
			assert.Equal(t, MapRoCEIPv6, o.Mapping, "%s: %+v", s, o)
		}
	}
}
