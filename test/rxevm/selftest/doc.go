// Package selftest checks the rxe VM that `make test-rxe` boots
// (test/rxevm): the Soft-RoCE device, its GID, multicast through rdma-core's
// own mckey, and the ns2 namespace. It has no code of its own; its tests
// skip outside the VM (RDMANET_TEST_DEVICE unset).
package selftest
