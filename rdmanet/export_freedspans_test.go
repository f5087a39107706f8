//go:build linux

package rdmanet

// FreedSpans returns how many freed SendBuffers c still recognizes
// (writes of their memory fail with ErrSendBufferFreed).
func FreedSpans(c *Conn) int {
	c.wr.mu.Lock()
	defer c.wr.mu.Unlock()
	return len(c.wr.freedSpans)
}

// MaxFreedSpans is how many freed SendBuffers a conn recognizes at most.
const MaxFreedSpans = maxFreedSpans
