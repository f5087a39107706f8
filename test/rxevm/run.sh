#!/usr/bin/env bash
# run.sh: `make test-rxe`. Builds the project's tests and runs them against
# the kernel's Soft-RoCE (rdma_rxe) inside a QEMU VM with no network device,
# and exits non-zero unless every test binary passed. See README.md.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

RXEVM_TIMEOUT=${RXEVM_TIMEOUT:-1200} # seconds for the whole VM run
if [[ $RXEVM_HOSTS == 2 ]]; then
  # Two VMs share the host's CPUs: one vCPU each. The tests run in VM a;
  # b runs the peer agent and what it starts.
  RXEVM_MEM=${RXEVM_MEM:-1536}
  RXEVM_SMP=${RXEVM_SMP:-1}
  # rdmanet/reliable for its netem test alone (RXEVM_PKG_RUN): on one host
  # rxe0's multicast to itself does not pass the netdev's qdisc.
  export RXEVM_PKGS=${RXEVM_PKGS:-./test/rxevm/twohost ./rdmanet/reliable}
  export RXEVM_PKG_RUN=${RXEVM_PKG_RUN-rdmanet/reliable=^TestNetemLoss\$}
  export RXEVM_CMDS=${RXEVM_CMDS-./cmd/... ./examples/... ./test/rxevm/rxepeer}
elif [[ $RXEVM_HOSTS != 1 ]]; then
  die "RXEVM_HOSTS=$RXEVM_HOSTS: want 1 or 2"
fi
RXEVM_MEM=${RXEVM_MEM:-2048} # MiB
RXEVM_SMP=${RXEVM_SMP:-2}
# Convenience for the harness's own failure check; other variables reach the
# tests through RXEVM_ENV="NAME=value ...".
if [[ -n ${RXEVM_SELFTEST_FAIL:-} ]]; then
  export RXEVM_ENV="${RXEVM_ENV:-} RXEVM_SELFTEST_FAIL=$RXEVM_SELFTEST_FAIL"
fi

# check_prereqs: every host tool the harness uses, with the Debian package
# that provides it; one message listing all that are missing.
check_prereqs() {
  local -a need=(
    qemu-system-x86_64:qemu-system-x86
    /bin/busybox:busybox-static
    /usr/bin/mckey:rdmacm-utils
    /usr/bin/udaddy:rdmacm-utils
    /usr/bin/ibv_devinfo:ibverbs-utils
    "/usr/lib/$MULTIARCH/libibverbs/librxe-rdmav34.so:ibverbs-providers"
    /etc/libibverbs.d/rxe.driver:ibverbs-providers
    ip:iproute2
    tc:iproute2
    /usr/bin/rdma:iproute2
    /usr/bin/ib_send_bw:perftest
    /usr/bin/ib_send_lat:perftest
    /usr/bin/sockperf:sockperf
    /usr/bin/stdbuf:coreutils
    apt-get:apt
    dpkg-deb:dpkg
    gcc:gcc # cgo: the rdma-core backend
    go:golang
  )
  local item what pkg missing=() pkgs=()
  [[ $(uname -m) == x86_64 ]] || die "needs an x86_64 host (host binaries are copied into an x86_64 VM)"
  for item in "${need[@]}"; do
    what=${item%:*} pkg=${item##*:}
    if [[ $what == /* ]]; then [[ -e $what ]] && continue; else command -v "$what" >/dev/null && continue; fi
    missing+=("$what")
    [[ " ${pkgs[*]} " == *" $pkg "* ]] || pkgs+=("$pkg")
  done
  # /init runs on busybox, which is copied without libraries: it must be
  # the static build.
  if [[ -e /bin/busybox ]] && ldd /bin/busybox >/dev/null 2>&1; then
    missing+=("static /bin/busybox") pkgs+=(busybox-static)
  fi
  if ((${#missing[@]})); then
    die "missing ${missing[*]}
  install: apt-get install -y ${pkgs[*]}$([[ " ${pkgs[*]} " == *" golang "* ]] && echo "  (Go: the version in go.mod)")"
  fi
}

# stamp [TAG]: copy lines (QEMU's serial console) to stdout, without the
# console's CRs, each prefixed with the seconds since the VM started (and
# TAG, the VM's name in two-host mode).
stamp() {
  local t0=${EPOCHREALTIME/./} line us tag=${1:+$1 }
  while IFS= read -r line || [[ -n $line ]]; do
    us=$((${EPOCHREALTIME/./} - t0))
    printf '[%4d.%02ds] %s%s\n' $((us / 1000000)) $((us / 10000 % 100)) "$tag" "${line%$'\r'}"
  done
}

# marker_time LOG MARKER: the stamp (seconds) of the first line with MARKER,
# or nothing.
marker_time() {
  sed -n "/$2/ { s/^\\[ *\\([0-9.]*\\)s\\].*/\\1/p; q }" "$1"
}

# qemu_args KERNEL_DIR IMAGE [APPEND...]: the QEMU command line of one VM,
# into the array QEMU.
qemu_args() {
  local kernel_dir=$1 image=$2
  shift 2
  QEMU=(
    qemu-system-x86_64
    -accel tcg -cpu max # /dev/kvm here is PVM: it cannot boot this kernel (README.md, KVM)
    -M pc -smp "$RXEVM_SMP" -m "$RXEVM_MEM"
    -nic none # no network device but the VM-to-VM link below, if any
    -display none -monitor none -serial stdio -no-reboot
    -kernel "$kernel_dir/vmlinuz" -initrd "$image"
    # panic=-1 reboots at once on a panic, and -no-reboot then ends QEMU.
    -append "console=ttyS0 panic=-1 quiet loglevel=3 mitigations=off${*:+ $*}"
  )
}

boot() {
  local kernel_dir=$1 image=$2 vmlog=$3 status
  qemu_args "$kernel_dir" "$image"
  local -a qemu=("${QEMU[@]}")
  log "booting: ${qemu[*]}"
  # stdin from /dev/null: QEMU leaves the terminal alone and reads no input.
  set +e
  timeout --kill-after=10 "$RXEVM_TIMEOUT" "${qemu[@]}" </dev/null 2>&1 | stamp | tee "$vmlog"
  status=${PIPESTATUS[0]}
  set -e
  return "$status"
}

# boot2 KERNEL_DIR IMAGE VMLOG: two VMs, b then a, joined by a virtio-net
# link over a unix-domain stream socket (b's QEMU listens, a's connects; no
# host network at all). a's console is shown live and saved in VMLOG, b's
# (prefixed "b") in vm-b.log beside it. Returns a's QEMU status.
boot2() {
  local kernel_dir=$1 image=$2 vmlog=$3 sock status i bpid
  local blog=${vmlog%/*}/vm-b.log
  sock=$RXEVM_WORK/link.sock
  rm -f "$sock"
  qemu_args "$kernel_dir" "$image" rxevm.host=b
  rm -f "$RXEVM_WORK/b.pid"
  QEMU+=(-pidfile "$RXEVM_WORK/b.pid"
    -netdev "stream,id=link,server=on,addr.type=unix,addr.path=$sock"
    -device virtio-net-pci,netdev=link,mac=52:54:00:97:00:02)
  log "booting b: ${QEMU[*]}"
  set +e
  (timeout --kill-after=10 "$((RXEVM_TIMEOUT + 60))" "${QEMU[@]}" </dev/null 2>&1 | stamp b | tee "$blog") &
  bpid=$!
  for ((i = 0; i < 100; i++)); do
    [[ -S $sock ]] && break
    sleep 0.1
  done
  [[ -S $sock ]] || { kill "$bpid"; die "VM b's QEMU made no $sock"; }
  qemu_args "$kernel_dir" "$image" rxevm.host=a
  QEMU+=(-netdev "stream,id=link,server=off,addr.type=unix,addr.path=$sock"
    -device virtio-net-pci,netdev=link,mac=52:54:00:97:00:01)
  log "booting a: ${QEMU[*]}"
  timeout --kill-after=10 "$RXEVM_TIMEOUT" "${QEMU[@]}" </dev/null 2>&1 | stamp a | tee "$vmlog"
  status=${PIPESTATUS[0]}
  # a asked b's agent to quit, and b powers off; give it 30 s.
  for ((i = 0; i < 300; i++)); do
    kill -0 "$bpid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$bpid" 2>/dev/null; then
    log "VM b still running 30 s after a: stopping it"
    kill "$(cat "$RXEVM_WORK/b.pid")" 2>/dev/null
  fi
  wait "$bpid"
  set -e
  return "$status"
}

main() {
  local t0 t kernel_dir image vmlog qemu_status rc kernel_s build_s vm_s boot_s
  t0=$(now)
  check_prereqs
  mkdir -p "$RXEVM_WORK"
  # One run at a time per work directory.
  exec 9>"$RXEVM_WORK/.lock"
  flock -n 9 || die "another run is using $RXEVM_WORK (set RXEVM_WORK to run in parallel)"

  t=$(now)
  kernel_dir=$("$RXEVM_DIR/kernel.sh")
  kernel_s=$(since "$t")
  t=$(now)
  image=$("$RXEVM_DIR/initramfs.sh" "$kernel_dir")
  build_s=$(since "$t")

  vmlog=$RXEVM_WORK/vm.log
  t=$(now)
  qemu_status=0
  if [[ $RXEVM_HOSTS == 2 ]]; then
    boot2 "$kernel_dir" "$image" "$vmlog" || qemu_status=$?
  else
    boot "$kernel_dir" "$image" "$vmlog" || qemu_status=$?
  fi
  vm_s=$(since "$t")

  echo
  log "---- results (full VM log: $vmlog)"
  # Markers, and Go's benchmark result lines (name, N, ns/op, ...).
  grep -a -E 'RXEVM-(PASS|FAIL |BENCH |ROUND|SUMMARY|SETUP-FAIL|STUCK|TABLE)|\] (a )?Benchmark[^[:space:]]+[[:space:]]+[0-9]+[[:space:]]' "$vmlog" |
    sed 's/^\[[ 0-9.]*s\] /  /' >&2 || true
  if [[ $RXEVM_HOSTS == 2 ]]; then
    grep -a -E 'RXEVM-(SETUP-FAIL|PEER-DONE)' "${vmlog%/*}/vm-b.log" | sed 's/^\[[ 0-9.]*s\] /  /' >&2 || true
  fi
  # Each failed test and its messages, last, where a log's tail shows them.
  grep -a 'RXEVM-FAILTEST' "$vmlog" | sed 's/^\[[ 0-9.]*s\] /  /' >&2 || true
  boot_s=$(marker_time "$vmlog" RXEVM-READY)
  log "times: kernel ${kernel_s}s, build ${build_s}s, boot to first test ${boot_s:-?}s, VM ${vm_s}s, total $(since "$t0")s"

  rc=$(grep -a -o 'RXEVM-RESULT rc=[0-9]*' "$vmlog" | tail -1 | cut -d= -f2 || true)
  if [[ $qemu_status == 124 || $qemu_status == 137 ]]; then
    die "VM timed out after ${RXEVM_TIMEOUT}s (RXEVM_TIMEOUT)"
  elif [[ -z $rc ]]; then
    grep -a -q 'Kernel panic' "$vmlog" && log "the guest kernel panicked"
    die "no RXEVM-RESULT line: the VM stopped before /init finished (QEMU exit status $qemu_status)"
  elif [[ $rc != 0 ]]; then
    die "FAILED (guest rc=$rc)"
  fi
  log "PASSED"
}

main "$@"
