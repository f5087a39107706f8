package ipoib

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseGID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want, expanded string }{
		{"fe80:0000:0000:0000:0002:c903:00a1:b2c1", "fe80::2:c903:a1:b2c1", "fe80:0000:0000:0000:0002:c903:00a1:b2c1"},
		{"fe80::2:c903:a1:b2c1", "fe80::2:c903:a1:b2c1", "fe80:0000:0000:0000:0002:c903:00a1:b2c1"},
		{"0000:0000:0000:0000:0000:ffff:0a63:0001", "::ffff:10.99.0.1", "0000:0000:0000:0000:0000:ffff:0a63:0001"},
		{"::ffff:10.99.0.1", "::ffff:10.99.0.1", "0000:0000:0000:0000:0000:ffff:0a63:0001"},
		{"FE80::1", "fe80::1", "fe80:0000:0000:0000:0000:0000:0000:0001"},
		{"::", "::", "0000:0000:0000:0000:0000:0000:0000:0000"},
	} {
		g, err := ParseGID(tc.in)
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, g.String(), tc.in)
		assert.Equal(t, tc.expanded, g.StringExpanded(), tc.in)
	}
	for _, bad := range []string{"", "10.99.0.1", "fe80::1%eth0", "fe80:::1", "fe80::1::2", "gggg::1", "1:2:3:4:5:6:7:8:9"} {
		_, err := ParseGID(bad)
		assert.Error(t, err, "%q", bad)
		_, err = ParseMGID(bad)
		assert.Error(t, err, "%q", bad)
	}
	_, err := ParseGID("10.99.0.1")
	assert.ErrorContains(t, err, "colon-hex")
}

func TestGIDAddr(t *testing.T) {
	t.Parallel()
	g := GIDFromIP(netip.MustParseAddr("10.99.0.1"))
	assert.Equal(t, "::ffff:10.99.0.1", g.String())
	assert.Equal(t, netip.MustParseAddr("10.99.0.1"), g.Addr())
	assert.False(t, g.IsZero())
	assert.True(t, GID{}.IsZero())
	g6 := GIDFromIP(netip.MustParseAddr("2001:db8::1"))
	assert.Equal(t, "2001:db8::1", g6.Addr().String())
}
