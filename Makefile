# Test entry points. `make help` lists them.
GO ?= go

.PHONY: help test test-netns test-rxe test-rxe2 bench-rxe bench-rxe2 mutate

help:
	@echo 'make test        go test ./...: unit tests; device tests skip without RDMANET_TEST_DEVICE'
	@echo 'make test-netns  go test -race -count=1 ./... in a new network namespace with only lo up (root)'
	@echo 'make test-rxe    all test binaries against Soft-RoCE (rdma_rxe) in a QEMU VM; see test/rxevm/README.md'
	@echo 'make test-rxe2   the two-host suite: two VMs, rxe on a virtio-net link between them'
	@echo 'make bench-rxe   rdmanet beside perftest in one VM (rxe0 to itself), RXEVM_BENCH_ROUNDS rounds (default 3)'
	@echo 'make bench-rxe2  rdmanet beside perftest across the two hosts, RXEVM_BENCH_ROUNDS rounds (default 3)'
	@echo 'make mutate      mutation testing (root; not in CI): MUTATE_FLAGS="-n 20", MUTATE_PKGS; see docs/testing.md'

test:
	$(GO) test ./...

# Multicast and UDP tests see only loopback and nothing of the host's network.
test-netns:
	unshare -n sh -c 'ip link set lo up && $(GO) test -race -count=1 ./...'

# Settings come from the environment or the command line, e.g.
# `make test-rxe RXEVM_BENCH=1 RXEVM_PKGS=./rdmanet`.
test-rxe:
	test/rxevm/run.sh

# Two VMs, each its own kernel with rxe0 on a virtio-net NIC, joined by a
# virtual Ethernet link (QEMU stream netdev over a unix socket); the tests
# in test/rxevm/twohost run in VM a and drive VM b through its agent.
test-rxe2:
	RXEVM_HOSTS=2 test/rxevm/run.sh

# The same comparison in one VM, rxe0 to itself (test/rxevm/init's
# run_benchmarks1 runs TestBenchTwoHost against an agent in the same VM).
bench-rxe:
	RXEVM_BENCH=perftest RXEVM_BENCH_ROUNDS=$${RXEVM_BENCH_ROUNDS:-3} RXEVM_TEST_RUN='^$$' \
	  RXEVM_PKGS=$${RXEVM_PKGS:-./test/rxevm/twohost} RXEVM_CMDS="$${RXEVM_CMDS-./cmd/rdmanet ./test/rxevm/rxepeer}" \
	  RXEVM_TEST_TIMEOUT=$${RXEVM_TEST_TIMEOUT:-1500} RXEVM_TIMEOUT=$${RXEVM_TIMEOUT:-1800} test/rxevm/run.sh

# The latency and rate comparison with perftest across the link, per round;
# 2 vCPUs per VM: with one, a polling reader (ib_send_lat without -e, a spin
# window) starves the kernel's rxe work on the same CPU.
bench-rxe2:
	RXEVM_HOSTS=2 RXEVM_BENCH=1 RXEVM_BENCH_ROUNDS=$${RXEVM_BENCH_ROUNDS:-3} RXEVM_TEST_RUN='^$$' RXEVM_SMP=$${RXEVM_SMP:-2} \
	  RXEVM_TEST_TIMEOUT=$${RXEVM_TEST_TIMEOUT:-1500} RXEVM_TIMEOUT=$${RXEVM_TIMEOUT:-1800} test/rxevm/run.sh

# Mutation testing: small mutants of each package's source, each run alone
# against the package's tests in a private namespace with
# RDMANET_TEST_NFT=1 (internal/tools/mutate). Not in CI: every mutant of a
# package takes hours; MUTATE_FLAGS="-n 20" samples 20 a package.
MUTATE_PKGS ?= ./rdmanet ./rdmanet/reliable ./internal/verbs/soft ./internal/roce ./internal/poller
mutate:
	$(GO) run ./internal/tools/mutate $(MUTATE_FLAGS) $(MUTATE_PKGS)
