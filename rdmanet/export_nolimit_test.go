//go:build linux

package rdmanet

import (
	"errors"
	"slices"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// BackendUnknownLimit is a test backend: the software provider, whose
// devices (named "unknown-limit-" and the software device's name, so
// that Devices lists them apart) report no max_qp_wr (0: unknown), and
// whose CreateQP fails with ErrCreateQPRefused.
const BackendUnknownLimit = "test-unknown-limit"

// ErrCreateQPRefused is BackendUnknownLimit's CreateQP error.
var ErrCreateQPRefused = errors.New("test: CreateQP refused")

const unknownLimitPrefix = "unknown-limit-"

func init() {
	verbs.Register(unknownLimitProvider{testProvider{name: BackendUnknownLimit, base: verbs.Software,
		wrap: func(id verbs.ID) verbs.ID { return refusingID{id} }}})
}

type unknownLimitProvider struct{ testProvider }

func (p unknownLimitProvider) Devices() ([]verbs.DeviceAttr, error) {
	devs, err := p.testProvider.Devices()
	devs = slices.Clone(devs)
	for i := range devs {
		devs[i].Name = unknownLimitPrefix + devs[i].Name
		devs[i].MaxQPWR = 0
	}
	return devs, err
}

type refusingID struct{ verbs.ID }

func (refusingID) CreateQP(verbs.QPConfig) (verbs.QP, error) { return nil, ErrCreateQPRefused }

func (r refusingID) Local() verbs.Binding {
	b := r.ID.Local()
	b.Device = unknownLimitPrefix + b.Device
	return b
}
