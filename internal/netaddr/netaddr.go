// Package netaddr holds the checks on a net.Addr argument that rdmanet and
// rdmanet/reliable share.
package netaddr

import "net"

// IsNil reports whether addr is nil, or a nil pointer of a type a conn
// takes: *net.UDPAddr, *net.IPAddr or P (*rdmanet.Addr). A typed nil
// pointer in a net.Addr is not == nil, yet a caller means no address.
func IsNil[P interface {
	*A
	net.Addr
}, A any](addr net.Addr) bool {
	switch a := addr.(type) {
	case nil:
		return true
	case *net.UDPAddr:
		return a == nil
	case *net.IPAddr:
		return a == nil
	case P:
		return a == nil
	}
	return false
}
