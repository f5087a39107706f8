//go:build linux

package rdmanet_test

import (
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// ParseAddr takes what its doc says: an IPv6-form GID, a slash, and a
// 24-bit QPN in hex with 0x or in decimal; nothing else.
func TestParseAddrTakesExactlyTheDocumentedForm(t *testing.T) {
	t.Parallel()
	good := []struct {
		in  string
		qpn uint32
	}{
		{"::ffff:10.99.0.1/0x000011", 0x11},
		{"::ffff:10.99.0.1/0x11", 0x11},
		{"::ffff:10.99.0.1/0xABcdef", 0xabcdef},
		{"::ffff:10.99.0.1/0x09afAF", 0x09afaf}, // each end of each digit range
		{"::ffff:10.99.0.1/9", 9},
		{"fe80::2:c903:0:1b41/0x000048", 0x48},
		{"::ffff:10.99.0.1/17", 17},
		{"::ffff:10.99.0.1/017", 17}, // decimal, not octal
		{"::ffff:10.99.0.1/16777215", 0xFFFFFF},
		{"ff0e::ffff:239.1.2.3/0xffffff", rdmanet.MulticastQPN},
	}
	for _, g := range good {
		a, err := rdmanet.ParseAddr(g.in)
		require.NoError(t, err, g.in)
		assert.Equal(t, g.qpn, a.QPN, g.in)
		back, err := rdmanet.ParseAddr(a.String())
		require.NoError(t, err)
		assert.Equal(t, a, back, "String and ParseAddr round-trip")
	}
	bad := []string{
		"", "/", "::ffff:10.99.0.1", "::ffff:10.99.0.1/", "/0x11",
		"10.99.0.1/0x11",               // a bare IPv4 address is not a GID
		"fe80::1%eth0/0x11",            // no zone
		"::ffff:10.99.0.1/0x",          // no digits
		"::ffff:10.99.0.1/0X11",        // 0x, as String writes it
		"::ffff:10.99.0.1/0x11 ",       // nothing after the number
		"::ffff:10.99.0.1/17x",         //
		"::ffff:10.99.0.1/0x0000011",   // at most 6 hex digits
		"::ffff:10.99.0.1/0o17",        // no octal prefix
		"::ffff:10.99.0.1/0b101",       // no binary prefix
		"::ffff:10.99.0.1/1_000",       // no underscores
		"::ffff:10.99.0.1/0x1_0",       // not in hex either
		"::ffff:10.99.0.1/+17",         // no sign
		"::ffff:10.99.0.1/-1",          //
		"::ffff:10.99.0.1/0x1000000",   // over 24 bits
		"::ffff:10.99.0.1/16777216",    //
		"::ffff:10.99.0.1/ 17",         // no spaces
		"::ffff:10.99.0.1/0x11/0x11",   // one slash
		"::ffff:10.99.0.1/99999999999", // over 32 bits too
	}
	for _, b := range bad {
		_, err := rdmanet.ParseAddr(b)
		assert.Error(t, err, "%q", b)
	}

	// An error does not echo unbounded input.
	long := "::ffff:10.99.0.1/" + strings.Repeat("9", 1<<20)
	_, err := rdmanet.ParseAddr(long)
	require.Error(t, err)
	assert.Less(t, len(err.Error()), 300, "error of %d bytes for a %d-byte input", len(err.Error()), len(long))
	assert.Contains(t, err.Error(), "bytes)")
}

// ParseAddr's error says which part is wrong, as its doc promises ("Err
// says what is wrong"): a string with no slash wants the GID/QPN form;
// an empty GID before the slash is the GID's fault, not the form's; an
// empty or bad QPN is the QPN's.
func TestParseAddrErrorSaysWhatIsWrong(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, why string }{
		{"::ffff:10.99.0.1", "want GID/QPN"},
		{"", "want GID/QPN"},
		{"/0x11", "the GID must be"},
		{"/", "the GID must be"},
		{"10.99.0.1/0x11", "the GID must be"},
		{"::ffff:10.99.0.1/", "no digits"},
		{"::ffff:10.99.0.1/0x", "no digits"},
		{"::ffff:10.99.0.1/0X11", "lower-case"},
		{"::ffff:10.99.0.1/0x0000011", "at most 6 hex digits"},
		{"::ffff:10.99.0.1/17x", "is not a digit"},
		{"::ffff:10.99.0.1/16777216", "over 24 bits"},
	} {
		_, err := rdmanet.ParseAddr(c.in)
		var ae *net.AddrError
		require.True(t, errors.As(err, &ae), "ParseAddr(%q): %v", c.in, err)
		assert.Contains(t, ae.Err, c.why, "ParseAddr(%q)", c.in)
		assert.Equal(t, strconv.Quote(c.in), ae.Addr, "ParseAddr(%q)", c.in)
	}
}

// Negative depths, sizes and windows are refused, not taken as defaults.
// The error is listenFails's: its Addr is the group, or none at all
// (not a nil *net.UDPAddr, which prints as "<nil>") for a nil group.
func TestListenConfigRejectsNegativeValues(t *testing.T) {
	t.Parallel()
	for name, mod := range map[string]func(*rdmanet.ListenConfig){
		"RecvDepth": func(lc *rdmanet.ListenConfig) { lc.RecvDepth = -1 },
		"SendDepth": func(lc *rdmanet.ListenConfig) { lc.SendDepth = -5 },
		"MaxInline": func(lc *rdmanet.ListenConfig) { lc.MaxInline = -1 },
		"Port":      func(lc *rdmanet.ListenConfig) { lc.Port = -1 },
		"Spin":      func(lc *rdmanet.ListenConfig) { lc.Spin = -time.Microsecond },
	} {
		for _, group := range []*net.UDPAddr{newGroup(), nil} {
			lc := testConfig()
			mod(&lc)
			err := listenFails(t, lc, group)
			assert.ErrorContains(t, err, "ListenConfig."+name, name)
			assert.ErrorContains(t, err, "must not be negative", name)
		}
	}
}

// ParseAddr's error quotes the string cut to its first 64 bytes: one of
// exactly 64 whole, one of 65 cut.
func TestParseAddrErrorQuotes64Bytes(t *testing.T) {
	for _, n := range []int{63, 64, 65, 100} {
		s := strings.Repeat("x", n)
		_, err := rdmanet.ParseAddr(s)
		var ae *net.AddrError
		require.True(t, errors.As(err, &ae), "ParseAddr(%d bytes): %v", n, err)
		want := strconv.Quote(s)
		if n > 64 {
			want = strconv.Quote(s[:64]) + "... (" + strconv.Itoa(n) + " bytes)"
		}
		require.Equal(t, want, ae.Addr, "%d bytes", n)
	}
}
