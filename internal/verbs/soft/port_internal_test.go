//go:build linux

package soft

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestPortInodesFields gives portInodes a /proc/net/udp-format file of
// its own: a socket's inode is its line's tenth field, so a line of ten
// fields names one and a line of nine, cut short before the inode, is
// skipped (not read past its end); a line whose local port differs, or
// whose inode is 0, names none.
func TestPortInodesFields(t *testing.T) {
	const text = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n" +
		"    1: 00000000:12B7 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 111 2 0000000000000000 0\n" +
		"    2: 0100007F:12B7 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 222\n" +
		"    3: 00000000:12B7 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0\n" +
		"    4: 00000000:12B7 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 0 2 0000000000000000 0\n" +
		"    5: 00000000:12B8 0100007F:12B7 07 00000000:00000000 00:00000000 00000000     0        0 333 2 0000000000000000 0\n"
	file := filepath.Join(t.TempDir(), "udp")
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	got := portInodes(file, 4791)
	if want := []string{"111", "222"}; !slices.Equal(got, want) {
		t.Fatalf("portInodes = %q, want %q", got, want)
	}
	if got := portInodes(filepath.Join(t.TempDir(), "none"), 4791); got != nil {
		t.Errorf("portInodes of no file = %q, want none", got)
	}
}
