//go:build !linux

package rdmacore

import (
	"runtime"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// Off Linux the provider registers under its name and says why it cannot
// run.
func init() {
	verbs.Register(verbs.Stub{ProviderName: verbs.RDMACore, Err: verbs.NeedsLinux(runtime.GOOS,
		"the rdma-core backend loads Linux's libibverbs and librdmacm")})
}
