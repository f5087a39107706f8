//go:build linux

package soft

import (
	"net"

	"github.com/go-rdma/rdmanet/internal/infiniband"
	"github.com/go-rdma/rdmanet/internal/verbs"
)

func init() { verbs.Register(Provider{}) }

// Provider is the software verbs provider (verbs.Software): RoCEv2 UD over
// UDP sockets, one device "sw-<netdev>" with one port per netdev.
type Provider struct{}

var _ verbs.Provider = Provider{}

// Name returns verbs.Software.
func (Provider) Name() string { return verbs.Software }

// Available is always nil on Linux: the provider needs nothing but UDP.
func (Provider) Available() error { return nil }

// Devices lists one software device per netdev, IPoIB netdevs excepted
// (RoCE v2 has no place on an InfiniBand link).
func (Provider) Devices() ([]verbs.DeviceAttr, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	devs := make([]verbs.DeviceAttr, 0, len(ifs))
	for i := range ifs {
		if lookupNetdev(liveNetdevs, &ifs[i]).kind == infiniband.NetdevIPoIB {
			continue
		}
		devs = append(devs, deviceAttr(&ifs[i]))
	}
	return devs, nil
}

// Serves reports whether the interface or address of cfg exists locally
// and is up (neither set: loopback).
func (Provider) Serves(cfg verbs.BindConfig) bool {
	r, err := resolve(cfg)
	if err != nil {
		return false
	}
	r.release()
	return true
}

// Bind resolves cfg and returns an ID bound to the software device of the
// netdev it names. Errors wrap verbs.ErrNoDevice (or ErrNotSupported for
// IPv6).
func (Provider) Bind(cfg verbs.BindConfig) (verbs.ID, error) {
	r, err := resolve(cfg)
	if err != nil {
		return nil, err
	}
	id, err := newID(r)
	if err != nil {
		r.release()
		return nil, err
	}
	return id, nil
}
