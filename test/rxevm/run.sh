#!/usr/bin/env bash
# run.sh: `make test-rxe`. Builds the project's tests and runs them against
# the kernel's Soft-RoCE (rdma_rxe) inside a QEMU VM with no network device,
# and exits non-zero unless every test binary passed. See README.md.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

RXEVM_TIMEOUT=${RXEVM_TIMEOUT:-1200} # seconds for the whole VM run
RXEVM_MEM=${RXEVM_MEM:-2048}         # MiB
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
    /usr/bin/rdma:iproute2
    /usr/bin/ib_send_bw:perftest
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

# stamp: copy lines (QEMU's serial console) to stdout, without the console's
# CRs, each prefixed with the seconds since the VM started.
stamp() {
  local t0=${EPOCHREALTIME/./} line us
  while IFS= read -r line || [[ -n $line ]]; do
    us=$((${EPOCHREALTIME/./} - t0))
    printf '[%4d.%02ds] %s\n' $((us / 1000000)) $((us / 10000 % 100)) "${line%$'\r'}"
  done
}

# marker_time LOG MARKER: the stamp (seconds) of the first line with MARKER,
# or nothing.
marker_time() {
  sed -n "/$2/ { s/^\\[ *\\([0-9.]*\\)s\\].*/\\1/p; q }" "$1"
}

boot() {
  local kernel_dir=$1 image=$2 vmlog=$3 status
  local -a qemu=(
    qemu-system-x86_64
    -accel tcg -cpu max # KVM cannot boot this kernel on these hosts
    -M pc -smp "$RXEVM_SMP" -m "$RXEVM_MEM"
    -nic none # no network device: nothing the tests send leaves the VM
    -display none -monitor none -serial stdio -no-reboot
    -kernel "$kernel_dir/vmlinuz" -initrd "$image"
    # panic=-1 reboots at once on a panic, and -no-reboot then ends QEMU.
    -append "console=ttyS0 panic=-1 quiet loglevel=3 mitigations=off"
  )
  log "booting: ${qemu[*]}"
  # stdin from /dev/null: QEMU leaves the terminal alone and reads no input.
  set +e
  timeout --kill-after=10 "$RXEVM_TIMEOUT" "${qemu[@]}" </dev/null 2>&1 | stamp | tee "$vmlog"
  status=${PIPESTATUS[0]}
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
  boot "$kernel_dir" "$image" "$vmlog" || qemu_status=$?
  vm_s=$(since "$t")

  echo
  log "---- results (full VM log: $vmlog)"
  # Markers, and Go's benchmark result lines (name, N, ns/op, ...).
  grep -a -E 'RXEVM-(PASS|FAIL|BENCH |ROUND|SUMMARY|SETUP-FAIL|STUCK)|\] Benchmark[^[:space:]]+[[:space:]]+[0-9]+[[:space:]]' "$vmlog" |
    sed 's/^\[[ 0-9.]*s\] /  /' >&2 || true
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
