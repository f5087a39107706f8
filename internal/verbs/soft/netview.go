//go:build linux

package soft

import (
	"cmp"
	"slices"
	"sync"

	"golang.org/x/sys/unix"
)

// Bind needs the namespace's links and addresses (readNetlinkView: a
// netlink socket and two dumps, most of what a Listen costs). They are
// kept per network namespace, and read again only when rtnetlink reports
// a change: each namespace's entry holds a netlink socket subscribed to
// link and IPv4 address notifications (RTMGRP_LINK, RTMGRP_IPV4_IFADDR),
// which the kernel queues before the call that made the change returns;
// a notification queued, or one lost to a full buffer (ENOBUFS), means
// read again. The namespace is told by the cookie (SO_NETNS_COOKIE) of a
// socket resolve made in it, the QP's unicast socket to be. At most
// maxNetViews namespaces are kept (each entry's socket holds its
// namespace alive), the least recently used one dropped first.
const maxNetViews = 4

type netView struct {
	cookie uint64
	sub    int // the subscribed netlink socket, non-blocking
	view   *netlinkView
	used   uint64 // netViews.tick when last used
	// stale: a change was read off sub but the view could not be read
	// again; the next look reads it.
	stale bool
}

var netViews struct {
	mu    sync.Mutex
	tick  uint64
	views []*netView
}

// netnsCookie is the cookie of the network namespace of sock
// (SO_NETNS_COOKIE, Linux 5.14), 0 where the kernel cannot tell or there
// is no socket (sock < 0). The getsockopt fails then (ENOPROTOOPT,
// EBADF), writing nothing, and GetsockoptUint64 returns its zero value
// with the error.
func netnsCookie(sock int) uint64 {
	cookie, _ := unix.GetsockoptUint64(sock, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
	return cookie
}

// currentNetlinkView returns the links and addresses of the network
// namespace of this thread, whose cookie is cookie: kept ones when
// nothing changed since they were read, else read now. With no cookie
// (0) or where a subscription cannot be made, it reads every time.
func currentNetlinkView(cookie uint64) (*netlinkView, error) {
	if cookie == 0 {
		return readNetlinkView()
	}
	netViews.mu.Lock()
	defer netViews.mu.Unlock()
	netViews.tick++
	for _, v := range netViews.views {
		if v.cookie == cookie {
			v.used = netViews.tick
			if v.stale || changed(v.sub) {
				nv, err := readNetlinkView()
				if err != nil {
					v.stale = true
					return nil, err
				}
				v.view, v.stale = nv, false
			}
			return v.view, nil
		}
	}
	sub, err := subscribeNetlink()
	if err != nil {
		return readNetlinkView()
	}
	nv, err := readNetlinkView() // after subscribing: no change falls between
	if err != nil {
		unix.Close(sub)
		return nil, err
	}
	v := &netView{cookie: cookie, sub: sub, view: nv, used: netViews.tick}
	if len(netViews.views) < maxNetViews {
		netViews.views = append(netViews.views, v)
		return nv, nil
	}
	// The least recently used goes (each look takes a tick of its own:
	// no two are equal).
	lru := slices.MinFunc(netViews.views, func(a, b *netView) int { return cmp.Compare(a.used, b.used) })
	unix.Close(lru.sub)
	*lru = *v
	return nv, nil
}

// subscribeNetlink opens a non-blocking rtnetlink socket subscribed to
// link and IPv4 address changes.
func subscribeNetlink() (int, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_ROUTE)
	if err != nil {
		return noFd, err
	}
	sa := &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: unix.RTMGRP_LINK | unix.RTMGRP_IPV4_IFADDR}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return noFd, err
	}
	return fd, nil
}

// changed reads the subscribed socket dry and reports whether it held
// anything: a notification, or an error (ENOBUFS: some were lost).
func changed(sub int) bool {
	var buf [4096]byte
	any := false
	for {
		_, _, err := unix.Recvfrom(sub, buf[:], unix.MSG_DONTWAIT)
		switch err {
		case nil:
			any = true
		case unix.EINTR:
		case unix.EAGAIN:
			return any
		default:
			return true
		}
	}
}
