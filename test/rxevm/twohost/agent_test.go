//go:build linux

package twohost

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDeliberateFailure lets the harness prove that a failing two-host test
// fails `make test-rxe2`: RXEVM_SELFTEST_FAIL=1 make test-rxe2.
func TestDeliberateFailure(t *testing.T) {
	if os.Getenv("RXEVM_SELFTEST_FAIL") != "1" {
		t.Skip("RXEVM_SELFTEST_FAIL=1 makes this test fail on purpose")
	}
	needPeer(t)
	t.Fatal("deliberate failure (RXEVM_SELFTEST_FAIL=1)")
}

// TestPeerReady: the peer answers, its rxe0 is ACTIVE with the GID of its
// address, and the two hosts reach each other's address over the link.
func TestPeerReady(t *testing.T) {
	s := needPeer(t)
	r, err := s.agent.Run("state", 10*time.Second, "cat", "/sys/class/infiniband/"+s.device+"/ports/1/state")
	require.NoError(t, err)
	require.Contains(t, r.Output, "ACTIVE", "peer's %s port 1 state", s.device)
	r, err = s.agent.Run("gids", 10*time.Second, "sh", "-c", "cat /sys/class/infiniband/"+s.device+"/ports/1/gids/*")
	require.NoError(t, err)
	require.Contains(t, r.Output, gidOf(s.peer), "peer's GIDs")
	r, err = s.agent.Run("ping", 20*time.Second, "ping", "-c", "1", "-W", "5", s.addr.String())
	require.NoError(t, err)
	require.Equal(t, 0, r.Code, "ping from the peer to %s:\n%s", s.addr, r.Output)
}

// gidOf returns the RoCE v2 GID of an IPv4 address as sysfs prints it.
func gidOf(ip []byte) string {
	ip4 := ip[len(ip)-4:]
	var b strings.Builder
	b.WriteString("0000:0000:0000:0000:0000:ffff:")
	const hex = "0123456789abcdef"
	for i, x := range ip4 {
		if i == 2 {
			b.WriteByte(':')
		}
		b.WriteByte(hex[x>>4])
		b.WriteByte(hex[x&15])
	}
	return b.String()
}
