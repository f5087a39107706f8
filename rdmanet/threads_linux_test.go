//go:build linux

package rdmanet_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// threadCount is the number of OS threads of this process.
func threadCount(t testing.TB) int {
	ents, err := os.ReadDir("/proc/self/task")
	require.NoError(t, err)
	return len(ents)
}
