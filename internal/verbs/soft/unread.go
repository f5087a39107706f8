//go:build linux

package soft

import (
	"golang.org/x/sys/unix"
)

// Unread reports whether the next Poll would find datagrams: what the
// last GRO read left (gro.go), or a datagram queued on either socket, as
// poll(2) with no timeout sees them. It takes nothing from the sockets;
// c.mu keeps the fds from closing under it. It always knows.
func (c *recvCQ) Unread() (pending, known bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false, true
	}
	if c.gro.pending() {
		return true, true
	}
	pfd := [2]unix.PollFd{{Fd: int32(c.q.mcFd), Events: unix.POLLIN}, {Fd: int32(c.q.uniFd), Events: unix.POLLIN}}
	// poll(2) writes every fd's revents, 0 where nothing happened, so
	// POLLIN in them says enough; its count adds nothing.
	_, err := unix.Poll(pfd[:], 0)
	return err == nil && (pfd[0].Revents|pfd[1].Revents)&unix.POLLIN != 0, true
}

// Unread reports whether the send CQ holds completions; it always knows.
func (c *sendCQ) Unread() (pending, known bool) { return c.queued.Load() > 0, true }
