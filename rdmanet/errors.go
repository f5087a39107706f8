package rdmanet

import (
	"errors"
	"fmt"
	"net"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

var (
	// ErrMessageTooLong is returned (wrapped in a *net.OpError) by writes
	// longer than MTU(): a UD message is one packet and is never split.
	ErrMessageTooLong = errors.New("message longer than the path MTU")
	// ErrNotJoined: a write to a group this conn has not joined.
	ErrNotJoined = errors.New("group not joined: call JoinGroup first")
	// ErrDeviceRemoved: the RDMA device went away under the conn.
	ErrDeviceRemoved = verbs.ErrDeviceRemoved
	// ErrNotSupported: the backend or fabric cannot do what was asked,
	// such as an IPv6 group on RoCEv2 (rdma_cm's ENOTSUPP).
	ErrNotSupported = verbs.ErrNotSupported
)

// errMsgSize wraps ErrMessageTooLong with the sizes.
type msgSizeError struct{ n, mtu int }

func (e *msgSizeError) Error() string {
	return fmt.Sprintf("%d-byte message longer than the path MTU of %d bytes (UD sends one packet; EMSGSIZE)", e.n, e.mtu)
}
func (e *msgSizeError) Unwrap() error { return ErrMessageTooLong }

// addrError says what was wrong with an address argument.
type addrError struct {
	addr net.Addr
	why  string
}

func (e *addrError) Error() string {
	if e.addr == nil {
		return "nil address: " + e.why
	}
	return fmt.Sprintf("address %s (%T): %s", e.addr, e.addr, e.why)
}

func (c *Conn) opError(op string, addr net.Addr, err error) error {
	if err == nil {
		return nil
	}
	var src net.Addr
	if c != nil {
		src = c.localAddr()
	}
	return &net.OpError{Op: op, Net: c.network, Source: src, Addr: addr, Err: err}
}
