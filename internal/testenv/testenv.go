// Package testenv is the environment the packages' tests share: the
// RDMANET_TEST_* variables, read here and nowhere else, and the private
// network namespaces tests re-run themselves in. Only tests import it.
//
// Tests that need a device or a VM are selected by these variables: unset,
// they skip; set, a device or variable that is missing fails them.
// docs/testing.md has the table.
package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// The variables. The VM harness (test/rxevm/init) sets those that describe
// the VMs; a developer sets the switches.
const (
	// EnvDevice names the RDMA device device tests run on (rxe0); unset,
	// they skip, and the other tests run on the software backend.
	EnvDevice = "RDMANET_TEST_DEVICE"
	// EnvAddr is the IP address of EnvDevice's port.
	EnvAddr = "RDMANET_TEST_ADDR"
	// EnvNetdev is the netdev under EnvDevice.
	EnvNetdev = "RDMANET_TEST_NETDEV"
	// EnvGIDIndex is EnvDevice's RoCE v2 GID index of EnvAddr.
	EnvGIDIndex = "RDMANET_TEST_GID_INDEX"
	// EnvNS2 names the one-VM harness's second network namespace.
	EnvNS2 = "RDMANET_TEST_NS2"
	// EnvNS2Addr is the address of the veth end inside EnvNS2.
	EnvNS2Addr = "RDMANET_TEST_NS2_ADDR"
	// EnvNSPeerDevice names the rxe device facing EnvNS2.
	EnvNSPeerDevice = "RDMANET_TEST_RXE_NS_PEER_DEVICE"
	// EnvNSPeerAddr is EnvNSPeerDevice's address.
	EnvNSPeerAddr = "RDMANET_TEST_RXE_NS_PEER_ADDR"
	// EnvPeer is the other VM's address; it selects the two-host suite.
	EnvPeer = "RDMANET_TEST_PEER"
	// EnvPeerAgent is the other VM's agent (host:port).
	EnvPeerAgent = "RDMANET_TEST_PEER_AGENT"
	// EnvPeerSoftAddr is the other VM's software-backend address, in the
	// namespace EnvPeerSoftNetns.
	EnvPeerSoftAddr  = "RDMANET_TEST_PEER_SOFT_ADDR"
	EnvPeerSoftNetns = "RDMANET_TEST_PEER_SOFT_NETNS"

	// EnvNFT, set to 1, makes the tests that take loss from nftables in a
	// namespace of their own fail, not skip, where they cannot run (no
	// root, no nft, no unshare). CI sets it.
	EnvNFT = "RDMANET_TEST_NFT"
	// EnvFull, set to 1, runs the reliable layer's long experiments at
	// their full counts (the loss matrices, the feedback scale table).
	EnvFull = "RDMANET_TEST_FULL"
	// EnvScaleRX lists TestFeedbackScale's group sizes ("4,64,1000").
	EnvScaleRX = "RDMANET_TEST_SCALE_RX"

	// EnvBenchRounds selects the two-host benchmark (test/rxevm/twohost,
	// `make bench-rxe2`) and its rounds; EnvBenchOnly is a regexp of its
	// rows, EnvBenchProfile asks for CPU profiles (1, peer, both) and
	// EnvBenchDiag for diagnosis lines (1, trace, hist).
	EnvBenchRounds  = "RDMANET_TEST_BENCH_ROUNDS"
	EnvBenchOnly    = "RDMANET_TEST_BENCH_ONLY"
	EnvBenchProfile = "RDMANET_TEST_BENCH_PROFILE"
	EnvBenchDiag    = "RDMANET_TEST_BENCH_DIAG"
	// EnvDiagStrace selects the two-host suite's TestDiagStrace.
	EnvDiagStrace = "RDMANET_TEST_DIAG_STRACE"
	// EnvSysmonSlack and EnvSysmonKeeper select diagnoses of the Go
	// runtime's sysmon in the two-host suite.
	EnvSysmonSlack  = "RDMANET_TEST_SYSMON_SLACK"
	EnvSysmonKeeper = "RDMANET_TEST_SYSMON_KEEPER"

	// EnvNetns is set by InOwnNetns in the process it starts, to the name
	// of the test it runs there; no one else sets it.
	EnvNetns = "RDMANET_TEST_NETNS"

	// EnvChild is set by InChild in the process it starts, to the name
	// of the test it runs there; no one else sets it.
	EnvChild = "RDMANET_TEST_CHILD"
)

var (
	device = os.Getenv(EnvDevice)
	addr   = os.Getenv(EnvAddr)
)

// Device returns the RDMA device the tests run on, or "" for the software
// backend.
func Device() string { return device }

// Addr returns the IP address of Device's port.
func Addr() string { return addr }

// NFT reports whether the nftables loss tests must run (EnvNFT=1).
func NFT() bool { return os.Getenv(EnvNFT) == "1" }

// Full reports whether the long experiments run at full counts
// (EnvFull=1).
func Full() bool { return os.Getenv(EnvFull) == "1" }

// ScaleRX returns EnvScaleRX's value, "" when unset.
func ScaleRX() string { return os.Getenv(EnvScaleRX) }

// NeedDevice skips t without EnvDevice, and fails it when EnvDevice names
// a device that is not there or EnvAddr is unset.
func NeedDevice(t testing.TB) {
	t.Helper()
	if device == "" {
		t.Skip("no RDMA device: run `make test-rxe`")
	}
	if _, err := os.Stat(filepath.Join("/sys/class/infiniband", device)); err != nil {
		t.Fatalf("%s=%s: device missing: %v", EnvDevice, device, err)
	}
	if addr == "" {
		t.Fatalf("%s=%s but %s (the device's address) is unset", EnvDevice, device, EnvAddr)
	}
}

// Need returns a variable the VM harness sets, failing t when it is
// unset: the test runs only through `make test-rxe` or `make test-rxe2`.
func Need(t testing.TB, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("%s is not set: run this test through `make test-rxe`", name)
	}
	return v
}

// Get returns the variable's value, "" when unset.
func Get(name string) string { return os.Getenv(name) }
