# shellcheck shell=bash
# Shared settings and helpers for the rxe VM harness; sourced by run.sh,
# kernel.sh and initramfs.sh. Every setting can be overridden from the
# environment (or `make test-rxe NAME=value`); test/rxevm/README.md lists them.

# The variables are used by the scripts that source this file:
# shellcheck disable=SC2034
RXEVM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$RXEVM_DIR/../.." && pwd)

# Downloaded kernel package and the modules picked from it (kept between runs).
RXEVM_CACHE=${RXEVM_CACHE:-$RXEVM_DIR/.cache}
# Everything built for one run: test binaries, initramfs, VM log.
RXEVM_WORK=${RXEVM_WORK:-$RXEVM_DIR/.work}

# Kernel modules wanted in the VM; their dependencies are added automatically.
# crc32_generic: rdma_rxe asks the crypto API for "crc32" and there is no
# modprobe in the VM to load it on demand, so it must be loaded up front.
# Two hosts (RXEVM_HOSTS=2) add the virtio-net NIC that links the VMs and
# macvlan (the software backend's namespace in VM b). sch_netem: tc's netem
# qdisc, the packet loss of rdmanet/reliable's TestNetemLoss.
export RXEVM_HOSTS=${RXEVM_HOSTS:-1}
if [[ $RXEVM_HOSTS == 2 ]]; then
  RXEVM_MODULES=${RXEVM_MODULES:-crc32_generic rdma_rxe rdma_ucm ib_umad veth tun virtio_pci virtio_net macvlan sch_netem}
else
  RXEVM_MODULES=${RXEVM_MODULES:-crc32_generic rdma_rxe rdma_ucm ib_umad veth tun sch_netem}
fi

# Multiarch directory of the host's (and so the VM's) shared libraries.
MULTIARCH=x86_64-linux-gnu

log() { printf 'rxevm: %s\n' "$*" >&2; }
die() { printf 'rxevm: error: %s\n' "$*" >&2; exit 1; }

# now: seconds since the epoch with microseconds, without forking (bash 5).
now() { printf '%s' "$EPOCHREALTIME"; }
# since START: seconds elapsed since START (a `now` value), one decimal.
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }
