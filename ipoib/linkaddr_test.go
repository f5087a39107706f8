package ipoib

import (
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLinkAddr(t *testing.T) {
	t.Parallel()
	const s = "80:00:00:48:fe:80:00:00:00:00:00:00:00:02:c9:03:00:a1:b2:c1"
	a, err := ParseLinkAddr(s)
	require.NoError(t, err)
	assert.Equal(t, s, a.String())
	assert.Equal(t, FlagRC, a.Flags())
	assert.True(t, a.Connected())
	assert.Equal(t, uint32(0x48), a.QPN())
	assert.Equal(t, "fe80::2:c903:a1:b2c1", a.GID().String())
	assert.False(t, a.IsMulticast())

	g, err := ParseGID("fe80::2:c903:a1:b2c1")
	require.NoError(t, err)
	assert.Equal(t, a, MakeLinkAddr(0x80, 0x48, g))
	// The QPN keeps 24 bits.
	assert.Equal(t, uint32(0x345678), MakeLinkAddr(0, 0x12345678, g).QPN())

	up, err := ParseLinkAddr("80:00:00:48:FE:80:00:00:00:00:00:00:00:02:C9:03:00:A1:B2:C1")
	require.NoError(t, err)
	assert.Equal(t, a, up)

	hw, err := net.ParseMAC(s)
	require.NoError(t, err)
	fromHW, err := LinkAddrFromHardware(hw)
	require.NoError(t, err)
	assert.Equal(t, a, fromHW)
	_, err = LinkAddrFromHardware(net.HardwareAddr{1, 2, 3, 4, 5, 6})
	assert.ErrorContains(t, err, "want 20")

	dg, err := ParseLinkAddr("00:00:00:48:fe:80:00:00:00:00:00:00:00:02:c9:03:00:a1:b2:c1")
	require.NoError(t, err)
	assert.False(t, dg.Connected())
}

func TestParseLinkAddrErrors(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{
		"",
		"98:03:9b:12:34:56",
		"80:00:00:48:fe:80:00:00:00:00:00:00:00:02:c9:03:00:a1:b2",       // 19 bytes
		"80:00:00:48:fe:80:00:00:00:00:00:00:00:02:c9:03:00:a1:b2:c1:00", // 21 bytes
		"80-00-00-48-fe-80-00-00-00-00-00-00-00-02-c9-03-00-a1-b2-c1",    // dashes
		"80:00:00:48:fe:80:00:00:00:00:00:00:00:02:c9:03:00:a1:b2:zz",    // not hex
		"8:000:00:48:fe:80:00:00:00:00:00:00:00:02:c9:03:00:a1:b2:c1",    // misplaced colon
		"80:00:00:48:fe:80:00:00:00:00:00:00:00:02:c9:03:00:a1:b2:+1",    // sign
	} {
		_, err := ParseLinkAddr(bad)
		assert.Error(t, err, "%q", bad)
	}
}
