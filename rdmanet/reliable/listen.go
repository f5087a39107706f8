package reliable

import (
	"context"
	"errors"
	"net"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// ListenConfig holds the options of a reliable conn: those of the
// *rdmanet.Conn under it and those of the protocol. The zero value is
// ready to use. It has the shape of rdmanet.ListenConfig, so a program
// moves from a plain conn to a reliable one by wrapping its config:
//
//	lc := reliable.ListenConfig{
//		Conn:   rdmanet.ListenConfig{Backend: rdmanet.BackendSoftware},
//		Config: reliable.Config{FlowControl: reliable.FlowMin},
//	}
//	c, err := lc.ListenMulticast(ctx, "rdma", nil, group)
type ListenConfig struct {
	// Conn configures the underlying rdmanet conn: backend, device,
	// depths, SendOnly (a publisher that does not read the group), Spin.
	// Its DisableLoopback is always set: a reliable conn does not read
	// its own messages, and the kernel (or the device) then drops its
	// copies before they cost a receive.
	Conn rdmanet.ListenConfig
	// Config configures the protocol: windows, flow control, timers.
	Config Config
}

// ListenMulticast joins the group with an *rdmanet.Conn of lc.Conn and
// returns a reliable conn on it, in the shape of
// rdmanet.ListenConfig.ListenMulticast: network is "rdma", "rdma4" or
// "rdma6"; a nil ifi means loopback, never "the interface of the
// default route"; ctx bounds the join. A reliable conn needs its group:
// a nil group is an error. Every error is a *net.OpError (Op "listen").
func (lc *ListenConfig) ListenMulticast(ctx context.Context, network string, ifi *net.Interface, group *net.UDPAddr) (*Conn, error) {
	return listen(ctx, &lc.Conn, network, ifi, group, lc.Config, nil)
}

// ListenMulticast is like ListenConfig.ListenMulticast with the zero
// ListenConfig, in the shape of rdmanet.ListenMulticast.
func ListenMulticast(network string, ifi *net.Interface, group *net.UDPAddr) (*Conn, error) {
	var lc ListenConfig
	return lc.ListenMulticast(context.Background(), network, ifi, group)
}

// Listen is ListenConfig.ListenMulticast with its options as arguments
// (lc nil: the zero rdmanet.ListenConfig), kept for the programs written
// against it:
//
//	(&ListenConfig{Conn: *lc, Config: cfg}).ListenMulticast(ctx, network, ifi, group)
func Listen(ctx context.Context, lc *rdmanet.ListenConfig, network string, ifi *net.Interface, group *net.UDPAddr, cfg Config) (*Conn, error) {
	return listen(ctx, lc, network, ifi, group, cfg, nil)
}

// errNoGroup: a reliable conn is always in one group.
var errNoGroup = errors.New("reliable: a reliable conn needs a multicast group (nil given)")

// listen is ListenMulticast with a test hook: drop, when not nil, sees
// every datagram received and drops it by returning true.
func listen(ctx context.Context, lc *rdmanet.ListenConfig, network string, ifi *net.Interface, group *net.UDPAddr, cfg Config, drop func([]byte) bool) (*Conn, error) {
	if group == nil {
		return nil, &net.OpError{Op: "listen", Net: network, Err: errNoGroup}
	}
	var l rdmanet.ListenConfig
	if lc != nil {
		l = *lc
	}
	// Own multicast is filtered by the session anyway; keeping it off
	// saves a receive per datagram sent.
	l.DisableLoopback = true
	c, err := l.ListenMulticast(ctx, network, ifi, group)
	if err != nil {
		return nil, err
	}
	rc, err := newConn(c, group, cfg, drop)
	if err != nil {
		c.Close()
		var op *net.OpError
		if !errors.As(err, &op) {
			err = &net.OpError{Op: "listen", Net: network, Source: c.LocalAddr(), Addr: group, Err: err}
		}
		return nil, err
	}
	return rc, nil
}
