// Package twohost holds the tests that cross a link between two kernels:
// `make test-rxe2` boots two VMs, each with Soft-RoCE (rxe0) on a virtio-net
// NIC, joined by a virtual Ethernet link (QEMU stream netdev over a
// unix-domain socket). The tests run in VM "a" and drive VM "b" through the
// peer agent (package peer); what runs on b is this same test binary in a
// helper role (see helpers_test.go), rdma-core's tools, or the chat.
//
// The tests are selected by RDMANET_TEST_PEER: unset, they skip; set, a
// missing peer or device fails them. test/rxevm/README.md lists the
// variables the VMs set.
package twohost
