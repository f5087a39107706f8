//go:build !linux

package soft

import (
	"runtime"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// Off Linux the provider registers under its name and says why it cannot
// run.
func init() {
	verbs.Register(verbs.Stub{ProviderName: verbs.Software, Err: verbs.NeedsLinux(runtime.GOOS,
		"the software backend (RoCE v2 over UDP) uses epoll, recvmmsg and netlink")})
}
