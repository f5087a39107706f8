//go:build !linux

package verbs

import "runtime"

// Off Linux no provider runs, so no arena is needed.
func mmapAnon(int) ([]byte, error) {
	return nil, NeedsLinux(runtime.GOOS, "arenas are mmap'd for a provider")
}

func munmap([]byte) error { return nil }
