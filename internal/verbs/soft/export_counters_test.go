//go:build linux

package soft

// ParseUDPMIB parses /proc/net/snmp text and returns the UDP MIB by nstat
// name (nil when there is no Udp line).
func ParseUDPMIB(b []byte) map[string]uint64 { return parseUDPMIB(b).deltas(udpMIB{}) }
