//go:build !linux

package main

import (
	"fmt"
	"runtime"

	"github.com/go-rdma/rdmanet/rdmanet"
)

const perfArgs = "pingpong|throughput [flags] (Linux only)"

// runPerf says why there is nothing to measure: perf runs rdmanet conns,
// and its UDP baseline uses Linux's socket options.
func runPerf(*env, []string) error {
	return fmt.Errorf("rdmanet needs Linux: perf measures rdmanet conns and a Linux UDP baseline (GOOS=%s): %w", runtime.GOOS, rdmanet.ErrUnavailable)
}
