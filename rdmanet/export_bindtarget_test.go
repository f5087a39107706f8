//go:build linux

package rdmanet

import "github.com/go-rdma/rdmanet/internal/verbs"

// BindTarget says what a BindConfig asks for, as the auto backend's
// fallback reason names it.
func BindTarget(bc verbs.BindConfig) string { return bindTarget(bc) }
