//go:build linux

package soft

import (
	"fmt"
	"os"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// Where the receive CQ's waiter sleeps: the channel's epoll set over
// both sockets (wide) or the multicast socket alone (narrow), and the
// watch that kicks a narrow sleeper for unicast datagrams.

// sleepNarrow says whether the waiter sleeps on the multicast socket: yes
// unless a unicast datagram came within the last wideWaits waits
// (sleepMode). Only the waiter calls it, before each sleep.
func (c *recvCQ) sleepNarrow() bool {
	if want := c.mode.next(); want != c.mode.state.Load() {
		c.setMode(want == modeNarrow)
	}
	return c.mode.narrow()
}

// setMode points the channel set and the unicast watch's set at sleeping
// narrow or wide, made only when the mode changes. Sockets are taken out
// of a set rather than left in it with no events: every socket event
// calls every epoll entry on the socket's wait queue, interested or not.
func (c *recvCQ) setMode(narrow bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	type change struct {
		epfd, fd int
		add      bool
	}
	changes := [3]change{
		{c.wideFd, c.q.mcFd, !narrow},
		{c.wideFd, c.q.uniFd, !narrow},
		{c.uniEpFd, c.q.uniFd, narrow},
	}
	for i, ch := range changes {
		if err := epollSet(ch.epfd, ch.fd, ch.add); err != nil {
			for _, undo := range changes[:i] { // back to as we were
				epollSet(undo.epfd, undo.fd, !undo.add)
			}
			return
		}
	}
	if narrow {
		// What came while the waiter slept wide is read by Poll
		// before the next narrow sleep.
		c.uniPending.Store(true)
		c.mode.set(modeNarrow)
	} else {
		c.mode.set(modeWide)
	}
}

// epollSet adds fd to epfd for EPOLLIN, or takes it out.
func epollSet(epfd, fd int, add bool) error {
	if !add {
		return unix.EpollCtl(epfd, unix.EPOLL_CTL_DEL, fd, nil)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
	return unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &ev)
}

// setKick sets the waiter's kick (nil: none). The first kick set starts
// the watch on the unicast socket; it runs until the QP is destroyed.
func (c *recvCQ) setKick(kick func()) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if kick == nil {
		c.kick.Store(nil)
		return nil
	}
	if c.closed {
		return fmt.Errorf("soft: receive channel: %w", verbs.ErrClosed)
	}
	c.kick.Store(&kick)
	if c.watch != nil {
		return nil
	}
	// The watch's file takes over the epoll set (no dup): stopWatch
	// closes it.
	f := os.NewFile(uintptr(c.uniEpFd), "rdmanet-soft-unicast")
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("soft: unicast watch: %w", err)
	}
	c.watch, c.watchDone = f, make(chan struct{})
	go c.watchUnicast(rc, c.watchDone)
	return nil
}

// watchUnicast kicks the waiter whenever the unicast socket has
// datagrams while it sleeps narrow: checked when the watch starts and on
// every readiness edge the netpoller reports (an edge that comes while a
// check runs is kept for the next wait), so none is missed. A waiter
// decides to sleep narrow before its last poll, so a datagram that came
// earlier is found by that poll. It returns when the watch's file is
// closed.
func (c *recvCQ) watchUnicast(rc syscall.RawConn, done chan struct{}) {
	defer close(done)
	evs := make([]unix.EpollEvent, 1)
	rc.Read(func(fd uintptr) bool {
		if n, _ := epollWait(int(fd), evs); n > 0 && c.mode.narrow() {
			c.uniPending.Store(true)
			c.kickWaiter()
		}
		if h := watchChecked.Load(); h != nil {
			(*h)()
		}
		return false // watch until closed
	})
}

// watchChecked, set by tests, is called after each of the watch's
// checks.
var watchChecked atomic.Pointer[func()]

// kickWaiter calls the registered kick, if any.
func (c *recvCQ) kickWaiter() {
	if k := c.kick.Load(); k != nil {
		(*k)()
	}
}

// stopWatch ends the unicast watch and waits for its goroutine; closing
// the watch's file closes the epoll set it watched.
func (c *recvCQ) stopWatch() {
	if c.watch != nil {
		c.watch.Close()
		<-c.watchDone
		c.watch = nil
		c.uniEpFd = noFd
	}
}
