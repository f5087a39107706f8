# Test entry points. `make help` lists them.
GO ?= go

.PHONY: help test test-netns test-rxe

help:
	@echo 'make test        go test ./...: unit tests; device tests skip without RDMANET_TEST_DEVICE'
	@echo 'make test-netns  go test -race -count=1 ./... in a new network namespace with only lo up (root)'
	@echo 'make test-rxe    all test binaries against Soft-RoCE (rdma_rxe) in a QEMU VM; see test/rxevm/README.md'

test:
	$(GO) test ./...

# Multicast and UDP tests see only loopback and nothing of the host's network.
test-netns:
	unshare -n sh -c 'ip link set lo up && $(GO) test -race -count=1 ./...'

# Settings come from the environment or the command line, e.g.
# `make test-rxe RXEVM_BENCH=1 RXEVM_PKGS=./rdmanet`.
test-rxe:
	test/rxevm/run.sh
