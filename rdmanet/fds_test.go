//go:build linux

package rdmanet_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// What each fd of a conn is, from /proc/self/fd: a conn joined to a group
// is listed, then closed, and the fds must be what they were. On the
// software backend a conn holds at most 4: its unicast and multicast UDP
// sockets, the receive CQ's epoll set and the unicast watch's (the send
// CQ and the event channel need no fd, and QPNs are reserved by one
// socket per block of 256, the process's).
func TestConnFds(t *testing.T) {
	warm := listen(t, newGroup()) // lazy package state (a QPN block) is not a conn's
	warm.Close()
	before := openFds(t)
	c := listen(t, newGroup())
	require.NoError(t, c.JoinGroup(nil, newGroup()))
	during := openFds(t)
	var added []string
	for fd, what := range during {
		if before[fd] != what {
			added = append(added, fmt.Sprintf("fd %s: %s", fd, describeFd(what)))
		}
	}
	slices.Sort(added)
	t.Logf("%s conn, two groups: %d fds\n\t%s", c.Backend().Name, len(added), strings.Join(added, "\n\t"))
	if c.Backend().Name == rdmanet.BackendSoftware {
		assert.LessOrEqual(t, len(added), 4, "fds per software conn")
	}
	require.NoError(t, c.Close())
	after := openFds(t)
	for fd, what := range after {
		if before[fd] != what {
			t.Errorf("fd %s (%s) open after Close", fd, describeFd(what))
		}
	}
	assert.Len(t, after, len(before), "fds after Close")
}

// openFds maps each open fd of the process to what it links to.
func openFds(t testing.TB) map[string]string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	m := map[string]string{}
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil {
			m[e.Name()] = l
		}
	}
	// ReadDir's own fd is gone by now: drop what no longer resolves.
	for fd := range m {
		if _, err := os.Readlink(filepath.Join("/proc/self/fd", fd)); err != nil {
			delete(m, fd)
		}
	}
	return m
}

// describeFd names a socket by its protocol and local address
// (/proc/net/udp, /proc/net/unix); other links are shown as they are
// (anon_inode:[eventpoll], anon_inode:[eventfd], ...).
func describeFd(link string) string {
	ino, ok := strings.CutPrefix(link, "socket:[")
	if !ok {
		return link
	}
	ino = strings.TrimSuffix(ino, "]")
	if b, err := os.ReadFile("/proc/thread-self/net/udp"); err == nil {
		for _, l := range strings.Split(string(b), "\n")[1:] {
			if f := strings.Fields(l); len(f) > 9 && f[9] == ino {
				return "UDP socket, local " + hexAddr(f[1])
			}
		}
	}
	if b, err := os.ReadFile("/proc/thread-self/net/unix"); err == nil {
		for _, l := range strings.Split(string(b), "\n")[1:] {
			if f := strings.Fields(l); len(f) > 6 && f[6] == ino {
				name := ""
				if len(f) > 7 {
					name = " " + f[7]
				}
				return "unix socket" + name
			}
		}
	}
	return link
}

// hexAddr turns /proc/net/udp's "0100007F:12B7" into 127.0.0.1:4791.
func hexAddr(s string) string {
	var a, p uint32
	if _, err := fmt.Sscanf(s, "%08X:%04X", &a, &p); err != nil {
		return s
	}
	return fmt.Sprintf("%d.%d.%d.%d:%d", byte(a), byte(a>>8), byte(a>>16), byte(a>>24), p)
}
