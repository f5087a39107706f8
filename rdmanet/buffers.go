package rdmanet

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// Buffer sizes: SetReadBuffer and SetWriteBuffer, which net.UDPConn has
// and programs call on a PacketConn (kcp-go's listener, quic-go to size
// its receive buffer), and ReadBuffer and WriteBuffer to read back what
// was granted, which net.UDPConn leaves to getsockopt.
//
// On the software backend they are the UDP sockets' SO_RCVBUF and
// SO_SNDBUF, as on net.UDPConn. On rdma-core a UD QP has no socket: what
// holds received datagrams until a read takes them is its posted receive
// ring (ListenConfig.RecvDepth buffers), and what holds sends until the
// device took them its send ring (SendDepth slots). A verbs QP's queue
// depths are fixed when it is created (ibv_modify_qp cannot change them;
// the conn's recovery resets the QP in place and keeps them), so there
// the sizes are read-only: a request the ring already holds succeeds and
// changes nothing, and a larger one fails, saying which ListenConfig
// depth to listen with.

// SoftwareSocketBuffer is the SO_RCVBUF and SO_SNDBUF, in bytes, that
// the software backend asks for each of a conn's sockets at listen (the
// kernel caps them at net.core.rmem_max and wmem_max; ReadBuffer and
// WriteBuffer return what was granted). A net.UDPConn set beside a conn
// gets the same buffering with SetReadBuffer(SoftwareSocketBuffer).
const SoftwareSocketBuffer = verbs.SoftSocketBuffer

// bufState holds the sizes granted, in bytes.
type bufState struct {
	read, write atomic.Int64
	sockets     bool // the QP is made of sockets (software backend)
}

// initBuffers records the sizes the conn starts with.
func (c *Conn) initBuffers() {
	r, w := c.qp.SocketBuffer(true), c.qp.SocketBuffer(false)
	c.bufs.sockets = r > 0
	if !c.bufs.sockets {
		r, w = c.ringBytes(true), c.ringBytes(false)
	}
	c.bufs.read.Store(int64(r))
	c.bufs.write.Store(int64(w))
}

// ringBytes is the memory of the receive ring (recv) or of the send
// ring: its depth times its slot size.
func (c *Conn) ringBytes(recv bool) int {
	if recv {
		return c.cfg.RecvDepth * int(c.rd.slotSize)
	}
	return c.cfg.SendDepth * int(c.wr.slotSize)
}

// SetReadBuffer sets how many bytes of received datagrams the conn holds
// before it drops them, as net.UDPConn's SetReadBuffer does. On the
// software backend it sets SO_RCVBUF of the conn's sockets (the kernel
// caps it at net.core.rmem_max); ReadBuffer says what was granted. On
// rdma-core the receive ring is the buffer and its depth is fixed when
// the QP is created: a size the ring holds already (ReadBuffer or less)
// changes nothing and returns nil; a larger one returns an error
// wrapping errors.ErrUnsupported that says what ListenConfig.RecvDepth to
// listen with. A negative size is an error; so is a closed conn
// (net.ErrClosed). Errors are *net.OpError values (Op "set").
func (c *Conn) SetReadBuffer(bytes int) error { return c.setBuffer(true, bytes) }

// SetWriteBuffer is SetReadBuffer's counterpart for sends: SO_SNDBUF of
// the socket the software backend sends from (capped at
// net.core.wmem_max); on rdma-core the send ring of
// ListenConfig.SendDepth slots, fixed as the receive ring is.
func (c *Conn) SetWriteBuffer(bytes int) error { return c.setBuffer(false, bytes) }

// ReadBuffer returns how many bytes of received datagrams the conn holds
// before it drops them: on the software backend the socket buffer the
// kernel granted (half what getsockopt(SO_RCVBUF) reports, the kernel
// doubling the request for its bookkeeping; 4 MiB asked for at listen,
// capped at net.core.rmem_max); on rdma-core the receive ring's memory,
// RecvDepth buffers of MTU()+40 bytes rounded up to 64. After Close, the
// last value.
func (c *Conn) ReadBuffer() int { return int(c.bufs.read.Load()) }

// WriteBuffer is ReadBuffer's counterpart for sends: the send socket's SO_SNDBUF as granted (software), or the send ring's memory,
// SendDepth slots of MTU() bytes rounded up to 64 (rdma-core).
func (c *Conn) WriteBuffer() int { return int(c.bufs.write.Load()) }

func (c *Conn) setBuffer(recv bool, bytes int) error {
	c.closeMu.Lock() // the QP's sockets stay open meanwhile
	defer c.closeMu.Unlock()
	if err := c.checkOpen(); err != nil {
		return c.opError("set", nil, err)
	}
	if bytes < 0 {
		return c.opError("set", nil, fmt.Errorf("rdmanet: buffer size %d: it must not be negative", bytes))
	}
	if !c.bufs.sockets {
		return c.opError("set", nil, c.ringFits(recv, bytes))
	}
	granted, err := c.qp.SetSocketBuffer(recv, bytes)
	if granted > 0 {
		if recv {
			c.bufs.read.Store(int64(granted))
		} else {
			c.bufs.write.Store(int64(granted))
		}
	}
	if errors.Is(err, verbs.ErrNotSupported) {
		err = c.ringFits(recv, bytes)
	}
	return c.opError("set", nil, err)
}

// ringFits says whether a ring fixed at its depth holds bytes: nil, or
// the error that says what depth would.
func (c *Conn) ringFits(recv bool, bytes int) error {
	depth, slot, field := c.cfg.RecvDepth, int(c.rd.slotSize), "RecvDepth"
	what := "receive ring"
	if !recv {
		depth, slot, field = c.cfg.SendDepth, int(c.wr.slotSize), "SendDepth"
		what = "send ring"
	}
	need := bytes / slot
	if bytes%slot != 0 {
		need++
	}
	if need <= depth {
		return nil
	}
	return &ringSizeError{what: what, field: field, depth: depth, slot: slot, bytes: bytes, need: need, backend: c.prov.Name()}
}

// ringSizeError: a buffer size the fixed ring cannot hold.
type ringSizeError struct {
	what, field, backend     string
	depth, slot, bytes, need int
}

func (e *ringSizeError) Error() string {
	return fmt.Sprintf("rdmanet: %s: the %s is the conn's buffer and its depth is fixed when the QP is created: "+
		"%d slots of %d bytes (%d bytes) cannot hold %d bytes; listen with ListenConfig.%s = %d "+
		"(at most the device's max_qp_wr, which `rdmanet devices` shows)",
		e.backend, e.what, e.depth, e.slot, e.depth*e.slot, e.bytes, e.field, e.need)
}

func (e *ringSizeError) Unwrap() error { return errors.ErrUnsupported }
