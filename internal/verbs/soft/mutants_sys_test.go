//go:build linux

package soft

import (
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The kernel's IP_TOS control message carries one byte (ip_cmsg_recv_tos):
// parseCmsgs takes it.
func TestParseCmsgsOneByteTOS(t *testing.T) {
	b := make([]byte, unix.CmsgSpace(1))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = unix.IPPROTO_IP, unix.IP_TOS
	h.SetLen(unix.CmsgLen(1))
	b[unix.CmsgLen(0)] = 0xB8 // DSCP EF
	var m rxMeta
	parseCmsgs(b, &m)
	if m.tos != 0xB8 {
		t.Errorf("parseCmsgs: tos %#x, want 0xb8", m.tos)
	}
}
