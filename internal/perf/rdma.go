package perf

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// RDMA is an Endpoint over an rdmanet conn: it sends to one group or one
// peer, and receives what the conn receives.
type RDMA struct {
	C *rdmanet.Conn // the conn
	// Lend makes Recv read with ReadLend (no copy: the datagram's length
	// is returned, b is left alone) instead of ReadFromAddr.
	Lend bool
	to   net.Addr     // WriteTo's destination
	ta   rdmanet.Addr // WriteBatch's
	ms   []rdmanet.Message
}

// batchSlots is how many messages an endpoint's batch calls hold before
// they grow.
const batchSlots = 64

// NewRDMA returns an endpoint over c that sends to to: a group (a
// *net.UDPAddr the conn sends to) or a peer's *rdmanet.Addr. A nil to
// makes a receive-only endpoint.
func NewRDMA(c *rdmanet.Conn, to net.Addr) (*RDMA, error) {
	e := &RDMA{C: c, to: to, ms: make([]rdmanet.Message, batchSlots)}
	switch a := to.(type) {
	case nil:
	case *rdmanet.Addr:
		e.ta = *a
	default:
		ga, err := c.GroupAddr(to)
		if err != nil {
			return nil, err
		}
		e.ta = ga
	}
	return e, nil
}

// ListenRDMA listens with lc on ifi (nil: loopback) to group, and returns
// an endpoint that sends to group and receives what the conn receives.
func ListenRDMA(lc rdmanet.ListenConfig, ifi *net.Interface, group *net.UDPAddr) (*RDMA, error) {
	ctx, cancel := context.WithTimeout(context.Background(), listenTimeout)
	defer cancel()
	c, err := lc.ListenMulticast(ctx, "rdma4", ifi, group)
	if err != nil {
		return nil, err
	}
	e, err := NewRDMA(c, group)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("rdmanet: group %v: %w", group, err)
	}
	return e, nil
}

// listenTimeout bounds a ListenMulticast (a join, on rdma-core).
const listenTimeout = 10 * time.Second

func (e *RDMA) messages(n int) []rdmanet.Message {
	if cap(e.ms) < n {
		e.ms = make([]rdmanet.Message, n)
	}
	return e.ms[:n]
}

// Send sends b with WriteTo.
func (e *RDMA) Send(b []byte) error { _, err := e.C.WriteTo(b, e.to); return err }

// SendBatch sends bs with one WriteBatch.
func (e *RDMA) SendBatch(bs [][]byte) error {
	ms := e.messages(len(bs))
	for i, b := range bs {
		ms[i].Buffer, ms[i].Addr = b, e.ta
	}
	_, err := e.C.WriteBatch(ms)
	return err
}

// Recv reads one datagram with ReadFromAddr, or with ReadLend (Lend).
func (e *RDMA) Recv(b []byte) (int, error) {
	if e.Lend {
		d, err := e.C.ReadLend()
		n := len(d.Payload)
		d.Release()
		return n, err
	}
	n, _, err := e.C.ReadFromAddr(b)
	return n, err
}

// RecvBatch reads with one ReadBatch.
func (e *RDMA) RecvBatch(bufs [][]byte, ns []int) (int, error) {
	ms := e.messages(len(bufs))
	for i, b := range bufs {
		ms[i].Buffer = b
	}
	n, err := e.C.ReadBatch(ms)
	for i := range n {
		ns[i] = ms[i].N
	}
	return n, err
}

// SetReadDeadline sets the conn's read deadline.
func (e *RDMA) SetReadDeadline(t time.Time) error { return e.C.SetReadDeadline(t) }

// Close closes the conn.
func (e *RDMA) Close() error { return e.C.Close() }

// MTU is the conn's MTU.
func (e *RDMA) MTU() int { return e.C.MTU() }
