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
	// ErrNotJoined is returned (wrapped) by a write to a group this conn
	// has not joined.
	ErrNotJoined = errors.New("group not joined: call JoinGroup first")
	// ErrGroupLimit is returned (wrapped) when JoinGroup (or
	// ListenMulticast) would pass a multicast membership limit: on the
	// software backend the kernel's net.ipv4.igmp_max_memberships
	// (default 20) groups per conn; on rdma-core the device's
	// max_mcast_grp groups, or its max_mcast_qp_attach QPs in one group.
	// The error names the limit, its value and how to raise it.
	ErrGroupLimit = verbs.ErrGroupLimit
	// ErrDeviceRemoved is returned (wrapped) by the conn's calls, Close
	// aside, once the RDMA device went away under the conn.
	ErrDeviceRemoved = verbs.ErrDeviceRemoved
	// ErrNotSupported is returned (wrapped) when the backend or fabric
	// cannot do what was asked, such as an IPv6 group on RoCEv2 (rdma_cm's
	// ENOTSUPP).
	ErrNotSupported = verbs.ErrNotSupported
	// ErrEarlierSendFailed is returned (wrapped in a *net.OpError, with
	// the failure's errno where one is known) by the write after a send
	// that failed once its own write had returned: a datagram of a
	// WriteBatch the kernel refused, or an error completion from the
	// device. That write sends nothing; the failure is also counted in
	// Stats.SendFailed. Like a UDP socket's pending ICMP error, each
	// such failure is reported once: the first one pending, while later
	// ones are only counted.
	ErrEarlierSendFailed = errors.New("an earlier datagram was not sent")
)

// msgSizeError wraps ErrMessageTooLong with the sizes.
type msgSizeError struct{ n, mtu int }

func (e *msgSizeError) Error() string {
	return fmt.Sprintf("%d-byte message longer than the path MTU of %d bytes (UD sends one packet; EMSGSIZE)", e.n, e.mtu)
}
func (e *msgSizeError) Unwrap() error { return ErrMessageTooLong }

// addrError says what was wrong with an address argument.
type addrError struct {
	addr net.Addr
	why  string
	err  error // what it wraps, if anything (ErrNotJoined)
}

func (e *addrError) Unwrap() error { return e.err }

func (e *addrError) Error() string {
	if e.addr == nil {
		return "missing address: " + e.why
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

// earlierSendError is a send that failed after its write returned; the
// next write returns it.
type earlierSendError struct{ err error }

func (e *earlierSendError) Error() string {
	return ErrEarlierSendFailed.Error() + ": " + e.err.Error()
}
func (e *earlierSendError) Unwrap() []error { return []error{ErrEarlierSendFailed, e.err} }

// kernelMsgSizeError is the kernel's EMSGSIZE for a datagram within MTU():
// the netdev's MTU fell after the conn was made. It is ErrMessageTooLong
// too.
type kernelMsgSizeError struct{ err error }

func (e *kernelMsgSizeError) Error() string {
	return e.err.Error() + " (the route's MTU is now smaller than MTU())"
}
func (e *kernelMsgSizeError) Unwrap() []error { return []error{e.err, ErrMessageTooLong} }

// wcSendError is an error completion of a send with no errno.
type wcSendError struct{ status verbs.WCStatus }

func (e *wcSendError) Error() string { return "send completion: " + e.status.String() }
