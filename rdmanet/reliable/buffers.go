package reliable

import "net"

// SetReadBuffer sets the receive buffer of the underlying conn, as
// net.UDPConn's SetReadBuffer does: see rdmanet.Conn.SetReadBuffer (on
// the software backend the sockets' SO_RCVBUF; on rdma-core the receive
// ring, fixed at ListenConfig.RecvDepth). Datagrams the underlying conn
// holds wait for the protocol; RecvWindow, not this, bounds what a
// receiver holds per sender once they are read.
func (c *Conn) SetReadBuffer(bytes int) error {
	if c.closing.Load() {
		return c.opError("set", nil, net.ErrClosed)
	}
	return c.conn.SetReadBuffer(bytes)
}

// SetWriteBuffer sets the send buffer of the underlying conn: see
// rdmanet.Conn.SetWriteBuffer. Window, not this, is what a sender keeps
// for repair.
func (c *Conn) SetWriteBuffer(bytes int) error {
	if c.closing.Load() {
		return c.opError("set", nil, net.ErrClosed)
	}
	return c.conn.SetWriteBuffer(bytes)
}

// ReadBuffer returns the underlying conn's ReadBuffer: the receive
// buffer granted, in bytes.
func (c *Conn) ReadBuffer() int { return c.conn.ReadBuffer() }

// WriteBuffer returns the underlying conn's WriteBuffer.
func (c *Conn) WriteBuffer() int { return c.conn.WriteBuffer() }
