//go:build linux

package rdmanet

import "github.com/go-rdma/rdmanet/internal/verbs"

// BackendStuckSendsRDMACore is BackendStuckSends over rdma-core: sends go
// to the device, but the conn never sees their completions, so the send
// ring fills and writes block (a real device completes them too fast to
// block a write on purpose).
const BackendStuckSendsRDMACore = "test-stuck-sends-rdma-core"

func init() { verbs.Register(stuckRDMACoreProvider{}) }

type stuckRDMACoreProvider struct{}

func (stuckRDMACoreProvider) base() verbs.Provider {
	p, err := verbs.Lookup(verbs.RDMACore)
	if err != nil {
		panic(err)
	}
	return p
}
func (stuckRDMACoreProvider) Name() string                           { return BackendStuckSendsRDMACore }
func (p stuckRDMACoreProvider) Available() error                     { return p.base().Available() }
func (p stuckRDMACoreProvider) Devices() ([]verbs.DeviceAttr, error) { return p.base().Devices() }
func (stuckRDMACoreProvider) Serves(verbs.BindConfig) bool           { return false }
func (p stuckRDMACoreProvider) Bind(cfg verbs.BindConfig) (verbs.ID, error) {
	id, err := p.base().Bind(cfg)
	if err != nil {
		return nil, err
	}
	return &stuckID{ID: id}, nil
}
