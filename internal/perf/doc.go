// Package perf is the measuring harness that `rdmanet perf`
// (cmd/rdmanet), the module's benchmarks (bench_test.go) and the VM
// benchmarks (test/rxevm/twohost) share: the endpoints a run sends and
// receives through (rdmanet conns and the net.UDPConn baseline, over the
// public API only), the loops that drive them (a flood, a counting
// receiver, an echo, a round-trip timer), and the tallies of what they
// measured (rates, loss, percentiles, medians, histograms) as pure
// functions.
package perf
