//go:build linux

package soft

import (
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestSendtoWaitsForRoom fills a non-blocking datagram socket's buffer,
// then checks that sendto blocks in waitWritable until the peer reads, and
// sends then.
func TestSendtoWaitsForRoom(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	msg := make([]byte, 1024)
	n := 0
	for ; ; n++ {
		if _, err := unix.Write(fds[0], msg); err == unix.EAGAIN {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- sendto(fds[0], []byte("last"), nil) }() // no address: the pair is connected
	select {
	case err := <-done:
		t.Fatalf("sendto returned %v with the buffer full (%d datagrams queued)", err, n)
	case <-time.After(100 * time.Millisecond):
	}
	buf := make([]byte, 2048)
	for range n {
		if _, err := unix.Read(fds[1], buf); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("sendto after room was made: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("sendto still blocked after the peer read everything")
	}
	k, err := unix.Read(fds[1], buf)
	if err != nil || string(buf[:k]) != "last" {
		t.Fatalf("read %q, %v; want the datagram sendto waited to send", buf[:k], err)
	}
}

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
