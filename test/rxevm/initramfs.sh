#!/usr/bin/env bash
# initramfs.sh KERNEL_DIR: build the project's test and command binaries and
# pack them, with rdma-core's tools and libraries, busybox, the kernel modules
# from KERNEL_DIR (see kernel.sh) and our /init, into
# $RXEVM_WORK/initramfs.cpio. Prints that path.
#
# Layout inside the VM (merged /usr, like the host):
#   /init                         the guest script (test/rxevm/init)
#   /etc/rxevm.env                settings for /init, written here
#   /usr/lib/modules/rxevm/       *.ko and modules.order
#   /rdmanet/tests/manifest       one line per test binary: NAME REL_DIR
#   /rdmanet/tests/NAME.test      `go test -c` output
#   /rdmanet/REL_DIR/testdata     each package's testdata (tests run in REL_DIR)
#   /rdmanet/bin/                 the project's commands (`go build`), on PATH
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

KERNEL_DIR=${1:?usage: initramfs.sh KERNEL_DIR}
# Packages whose tests run in the VM (only those with test files are built),
# and the commands they may exec; both are `go list` patterns.
RXEVM_PKGS=${RXEVM_PKGS:-./...}
RXEVM_CMDS=${RXEVM_CMDS-./cmd/... ./examples/...} # set and empty: none
# Extra flags for `go test -c` and `go build`, e.g. -race.
RXEVM_GOFLAGS=${RXEVM_GOFLAGS:-}

R=$RXEVM_WORK/root
IMAGE=$RXEVM_WORK/initramfs.cpio

# Host tools and libraries copied into the VM. ib_send_bw and ib_send_lat are perftest's, for
# RXEVM_BENCH, and sockperf its UDP floor (C beside net.UDPConn); tc (iproute2) sets the netem qdisc of TestNetemLoss; stdbuf line-buffers tools that may be killed by a timeout
# (their block-buffered stdout would be lost otherwise).
HOST_BINS=(
  /usr/bin/mckey /usr/bin/udaddy /usr/bin/ibv_devinfo /usr/bin/ibv_devices
  /usr/bin/ib_send_bw /usr/bin/ib_send_lat /usr/bin/sockperf /usr/bin/rdma /usr/bin/stdbuf
  "$(command -v ip)" "$(command -v tc)"
)
# RXEVM_EXTRA_BINS: more host tools by name, for a diagnosis (e.g. strace).
for b in ${RXEVM_EXTRA_BINS:-}; do
  HOST_BINS+=("$(command -v "$b")")
done
HOST_LIBS=(
  # The rdma-core backend dlopens these two, so ldd of our binaries misses them.
  "/usr/lib/$MULTIARCH/libibverbs.so.1"
  "/usr/lib/$MULTIARCH/librdmacm.so.1"
  # rxe's userspace provider, found through /etc/libibverbs.d/rxe.driver in
  # libibverbs' compiled-in directory.
  "/usr/lib/$MULTIARCH/libibverbs/librxe-rdmav34.so"
  # stdbuf LD_PRELOADs this from its compiled-in path.
  /usr/libexec/coreutils/libstdbuf.so
)

# --- Go binaries --------------------------------------------------------------

# go_list PATTERNS...: "import-path<TAB>dir<TAB>n-test-files<TAB>package-name"
# for every package; -e so that patterns naming missing or empty directories
# (packages other engineers have not written yet) are reported, not fatal.
go_list() {
  (cd "$REPO_ROOT" && go list -e \
    -f '{{.ImportPath}}{{"\t"}}{{.Dir}}{{"\t"}}{{len .TestGoFiles}}{{"\t"}}{{len .XTestGoFiles}}{{"\t"}}{{.Name}}' "$@")
}

build_tests() {
  local imp dir nt nx _ rel name n=0
  mkdir -p "$R/rdmanet/tests"
  : >"$R/rdmanet/tests/manifest"
  # shellcheck disable=SC2086 # RXEVM_PKGS is a list of patterns
  while IFS=$'\t' read -r imp dir nt nx _; do
    if [[ -z $dir || $((nt + nx)) -eq 0 ]]; then
      log "tests: skipping $imp (no test files)"
      continue
    fi
    rel=$(realpath --relative-to="$REPO_ROOT" "$dir")
    # A file name for the binary: the package's directory, '/' -> '_'.
    name=${rel//\//_}; [[ $rel == . ]] && name=root
    (cd "$REPO_ROOT" && CGO_ENABLED=1 go test -c $RXEVM_GOFLAGS \
      -o "$R/rdmanet/tests/$name.test" "$imp") || die "go test -c $imp failed"
    copy_libs "$R/rdmanet/tests/$name.test"
    # Go runs a test in its package directory, where it may read testdata/.
    mkdir -p "$R/rdmanet/$rel"
    [[ -d $dir/testdata ]] && cp -a "$dir/testdata" "$R/rdmanet/$rel/"
    echo "$name $rel" >>"$R/rdmanet/tests/manifest"
    n=$((n + 1))
  done < <(go_list $RXEVM_PKGS)
  [[ $n -gt 0 ]] || die "no test binaries: RXEVM_PKGS='$RXEVM_PKGS' has no package with tests"
  # Tests may read another package's testdata by relative path (the
  # command's tests read ipoib's fake sysfs trees): copy every testdata
  # directory of the tree, not only those of the packages built.
  local td
  while IFS= read -r td; do
    rel=$(realpath --relative-to="$REPO_ROOT" "$td")
    [[ -d $R/rdmanet/$rel ]] && continue
    mkdir -p "$R/rdmanet/$(dirname "$rel")"
    cp -a "$td" "$R/rdmanet/$rel"
  done < <(find "$REPO_ROOT" -path "$REPO_ROOT/test/rxevm/.*" -prune -o -type d -name testdata -print)
  log "tests: built $n binaries: $(cut -d' ' -f2 "$R/rdmanet/tests/manifest" | tr '\n' ' ')"
}

build_commands() {
  local imp dir name out
  mkdir -p "$R/rdmanet/bin"
  [[ -n ${RXEVM_CMDS// /} ]] || return 0 # `go list` with no pattern means "."
  # shellcheck disable=SC2086
  while IFS=$'\t' read -r imp dir _ _ name; do
    [[ $name == main ]] || continue
    out=$R/rdmanet/bin/$(basename "$imp")
    [[ -e $out ]] && die "two commands named $(basename "$imp"): set RXEVM_CMDS"
    (cd "$REPO_ROOT" && CGO_ENABLED=1 go build $RXEVM_GOFLAGS -o "$out" "$imp") ||
      die "go build $imp failed"
    copy_libs "$out"
    log "commands: built $(basename "$imp") ($imp)"
  done < <(go_list $RXEVM_CMDS 2>/dev/null)
}

# --- host files ---------------------------------------------------------------

declare -A COPIED=()

# vm_path PATH: where a host file goes in the VM's merged /usr
# (/lib/x/libc.so.6 -> /usr/lib/x/libc.so.6, /lib64/ld-linux... -> /usr/lib64/...).
vm_path() {
  case $1 in
    /usr/*) echo "$1" ;;
    *) echo "/usr$1" ;;
  esac
}

# copy FILE [DEST]: copy a host file (following links) to DEST in the VM.
copy() {
  local src=$1 dst=${2:-$(vm_path "$1")}
  [[ -n ${COPIED[$dst]:-} ]] && return
  COPIED[$dst]=1
  mkdir -p "$R$(dirname "$dst")"
  cp -L "$src" "$R$dst"
}

# copy_libs FILE: copy the shared libraries FILE needs (none if static).
copy_libs() {
  local lib
  # ldd lines: "libx.so => /lib/.../libx.so (0x...)" or "/lib64/ld-linux... (0x...)"
  for lib in $(ldd "$1" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'); do
    copy "$lib"
  done
}

copy_host_files() {
  local f
  for f in "${HOST_BINS[@]}"; do
    copy "$f" "/usr/bin/$(basename "$f")"
    copy_libs "$f"
  done
  for f in "${HOST_LIBS[@]}"; do
    copy "$f"
    copy_libs "$f"
  done
  copy /etc/libibverbs.d/rxe.driver /etc/libibverbs.d/rxe.driver

  # busybox provides the shell and everything else. It must not replace a
  # real tool copied above (e.g. iproute2's ip, which can make veth pairs),
  # and the links are made last: `cp -L` onto an applet link would overwrite
  # busybox itself.
  copy /bin/busybox /usr/bin/busybox
  for f in $(/bin/busybox --list); do
    [[ -e $R/usr/bin/$f ]] || ln -s busybox "$R/usr/bin/$f"
  done
}

# --- the image ----------------------------------------------------------------

# write_env: the settings /init reads, as shell assignments.
write_env() {
  local v
  {
    for v in RXEVM_TEST_TIMEOUT RXEVM_TEST_RUN RXEVM_TEST_ARGS RXEVM_ENV \
      RXEVM_BENCH RXEVM_BENCH_RUN RXEVM_BENCHTIME RXEVM_BENCH_SIZE RXEVM_BENCH_ITERS \
      RXEVM_BENCH_ROUNDS RXEVM_PKG_RUN; do
      # '...' quoting, with any ' inside written as '\''
      [[ -n ${!v:-} ]] && printf "%s='%s'\n" "$v" "${!v//\'/\'\\\'\'}"
    done
    true
  } >"$R/etc/rxevm.env"
}

main() {
  rm -rf "$R"
  mkdir -p "$R"/{usr/bin,usr/lib,usr/lib64,etc,dev,proc,sys,run,tmp,root}
  # merged /usr: /bin/sh, /lib/x86_64-linux-gnu/... and the ELF interpreter
  # /lib64/ld-linux-x86-64.so.2 resolve as on the host.
  ln -s usr/bin "$R/bin"; ln -s usr/bin "$R/sbin"; ln -s usr/bin "$R/usr/sbin"
  ln -s usr/lib "$R/lib"; ln -s usr/lib64 "$R/lib64"

  local t0
  t0=$(now)
  build_tests
  build_commands
  log "go binaries built in $(since "$t0")s"

  t0=$(now)
  copy_host_files
  mkdir -p "$R/usr/lib/modules/rxevm"
  cp "$KERNEL_DIR"/modules/*.ko "$KERNEL_DIR/modules.order" "$R/usr/lib/modules/rxevm/"
  cp "$RXEVM_DIR/init" "$R/init"
  chmod 755 "$R/init"
  echo 'root:x:0:0:root:/root:/bin/sh' >"$R/etc/passwd"
  echo 'root:x:0:' >"$R/etc/group"
  printf '127.0.0.1 localhost\n::1 localhost\n' >"$R/etc/hosts"
  write_env
  # Uncompressed: QEMU loads the file straight into guest memory, so its size
  # costs little, and the guest has nothing to inflate under emulation.
  (cd "$R" && find . | LC_ALL=C sort | /bin/busybox cpio -o -H newc -R 0:0 2>/dev/null) >"$IMAGE"
  log "initramfs: $(du -m "$IMAGE" | cut -f1) MB, packed in $(since "$t0")s"
  echo "$IMAGE"
}

main "$@"
