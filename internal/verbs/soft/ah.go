//go:build linux

package soft

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/roce"
	"github.com/go-rdma/rdmanet/internal/verbs"
)

// Address handles: a resolved IPv4 destination, checked against the
// route from the QP's address.

// ah is an address handle: the resolved IPv4 destination.
type ah struct {
	attr   verbs.AHAttr
	qp     *QP
	dst    [4]byte
	closed atomic.Bool
}

func (a *ah) Attr() verbs.AHAttr { return a.attr }
func (a *ah) Close() error       { a.closed.Store(true); return nil }

// CreateAH checks that the DGID is an IPv4-mapped GID (::ffff:a.b.c.d,
// unicast or multicast) and resolves it to a.b.c.d:4791. For a unicast
// DGID it asks the kernel for the route from the QP's own address, as
// ibv_create_ah does on RoCE (it resolves the route and neighbour): a
// destination that cannot be reached fails here, wrapping the connect(2)
// errno (ENETUNREACH with no route, EHOSTUNREACH, EINVAL for a loopback
// source and a destination off the host).
func (q *QP) CreateAH(attr verbs.AHAttr) (verbs.AH, error) {
	a := attr.DGID.Addr()
	if attr.DGID.IsZero() || !a.IsValid() {
		return nil, errors.New("soft: ibv_create_ah: zero DGID")
	}
	if !a.Is4() {
		return nil, fmt.Errorf("soft: ibv_create_ah: DGID %v is not IPv4-mapped: %w", attr.DGID, verbs.ErrNotSupported)
	}
	dst := a.As4()
	if !a.IsMulticast() {
		if err := routeFrom(q.unicast, dst); err != nil {
			return nil, fmt.Errorf("soft: ibv_create_ah: route from %v to %v: %w", net.IP(q.unicast[:]), a, err)
		}
	}
	return &ah{attr: attr, qp: q, dst: dst}, nil
}

// routeFrom asks the kernel's FIB for a route from src to dst:4791 by
// connecting a UDP socket bound to src (nothing is sent).
func routeFrom(src, dst [4]byte) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return os.NewSyscallError("socket", err)
	}
	defer unix.Close(fd)
	// IP_FREEBIND: the source is checked by the route lookup, not the bind
	// (127.q.q.q on lo is local anyway; a netdev's address is too).
	setBoolOpt(fd, unix.IPPROTO_IP, unix.IP_FREEBIND, true)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: src}); err != nil {
		return os.NewSyscallError("bind", err)
	}
	if err := unix.Connect(fd, &unix.SockaddrInet4{Port: roce.UDPPort, Addr: dst}); err != nil {
		return os.NewSyscallError("connect", err)
	}
	return nil
}
