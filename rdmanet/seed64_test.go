//go:build linux

package rdmanet_test

import (
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/rdmanet"
)

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

// A ReadBatch of no messages reads none and returns at once: 0 and no
// error on an open conn, 0 and net.ErrClosed after Close.
func TestReadBatchOfNone(t *testing.T) {
	t.Parallel()
	c := listen(t, newGroup())
	for _, ms := range [][]rdmanet.Message{nil, {}} {
		n, err := c.ReadBatch(ms)
		require.NoError(t, err)
		require.Zero(t, n)
	}
	require.NoError(t, c.Close())
	n, err := c.ReadBatch(nil)
	require.ErrorIs(t, err, net.ErrClosed)
	require.Zero(t, n)
}
