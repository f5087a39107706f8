//go:build linux

package rdmanet

// Depths returns the receive and send ring depths c listened with.
func Depths(c *Conn) (recv, send int) { return c.cfg.RecvDepth, c.cfg.SendDepth }
