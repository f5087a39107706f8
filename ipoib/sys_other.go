//go:build !linux

package ipoib

import (
	"runtime"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// needsLinux refuses the running system (root "/" or ""): only Linux has
// the sysfs that discovery reads. A fake tree under another root reads
// anywhere.
func needsLinux(root string) error {
	if root != "" && root != "/" {
		return nil
	}
	return verbs.NeedsLinux(runtime.GOOS, "discovery reads Linux's /sys/class/infiniband and /sys/class/net")
}
