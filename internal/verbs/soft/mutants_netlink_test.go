//go:build linux

package soft

import (
	"errors"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// A recvfrom that fails returns its errno. rtnetlink answers no message
// of a type below NLMSG_MIN_TYPE without NLM_F_ACK, so a non-blocking
// socket finds nothing to read: EAGAIN.
func TestNetlinkDumpRecvError(t *testing.T) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatalf("socket: %v", err)
	}
	defer unix.Close(fd)
	buf := make([]byte, 1<<16)
	err = netlinkDump(fd, buf, unix.NLMSG_NOOP, 1, func(*syscall.NetlinkMessage) error { return nil })
	if !errors.Is(err, unix.EAGAIN) {
		t.Errorf("netlinkDump with no answer: %v, want EAGAIN from recvfrom", err)
	}
}
