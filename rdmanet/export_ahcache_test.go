//go:build linux

package rdmanet

// AHCacheLen returns how many unicast address handles c keeps.
func AHCacheLen(c *Conn) int {
	c.wr.mu.Lock()
	defer c.wr.mu.Unlock()
	return len(c.wr.ahs)
}

// MaxAHCache is how many unicast address handles a conn keeps at most.
const MaxAHCache = maxAHCache
