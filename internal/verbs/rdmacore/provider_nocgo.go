//go:build linux && !cgo

package rdmacore

import (
	"fmt"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

func init() { verbs.Register(provider{}) }

// provider stands in for rdma-core in a build without cgo: it registers
// under the same name and says why it cannot run.
type provider struct{}

var _ verbs.Provider = provider{}

var errNoCgo = fmt.Errorf("rdmacore: built without cgo (CGO_ENABLED=0): rebuild with CGO_ENABLED=1 and a C compiler to use rdma-core: %w", verbs.ErrUnavailable)

func (provider) Name() string                            { return verbs.RDMACore }
func (provider) Available() error                        { return errNoCgo }
func (provider) Devices() ([]verbs.DeviceAttr, error)    { return nil, errNoCgo }
func (provider) Serves(verbs.BindConfig) bool            { return false }
func (provider) Bind(verbs.BindConfig) (verbs.ID, error) { return nil, errNoCgo }
