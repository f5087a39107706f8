#!/usr/bin/env bash
# kernel.sh: make Debian's kernel and the Soft-RoCE modules available for the
# VM, and print the directory that holds them:
#   DIR/vmlinuz        the kernel
#   DIR/modules/*.ko   rdma_rxe and everything it needs, uncompressed
#   DIR/modules.order  file names, dependencies first (the VM insmods in order)
#
# The package is the full (non-cloud) flavour that linux-image-amd64 depends
# on: only that one ships rdma_rxe.ko. It is fetched once with
# `apt-get download` and kept in $RXEVM_CACHE with the picked modules, so
# later runs neither download nor extract anything.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

debs=$RXEVM_CACHE/debs
mkdir -p "$debs"

# kernel_package: the versioned image package, e.g. linux-image-6.1.0-56-amd64.
kernel_package() {
  if [[ -n ${RXEVM_KERNEL_PKG:-} ]]; then
    echo "$RXEVM_KERNEL_PKG"
    return
  fi
  local pkg
  pkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
    awk '/Depends: linux-image-[0-9]/ { print $2; exit }') || true
  if [[ -z $pkg ]]; then
    # No apt lists (no `apt-get update` yet): fall back to what we fetched before.
    pkg=$(find "$debs" -name 'linux-image-[0-9]*.deb' -printf '%f\n' | sort -V | tail -1)
    pkg=${pkg%%_*}
  fi
  [[ -n $pkg ]] || die "cannot tell which kernel package linux-image-amd64 needs (run apt-get update, or set RXEVM_KERNEL_PKG)"
  echo "$pkg"
}

# fetch_deb PKG: path of PKG's .deb in the cache, downloading it if needed.
fetch_deb() {
  local pkg=$1 deb tmp t0
  deb=$(find "$debs" -name "${pkg}_*.deb" | sort -V | tail -1)
  if [[ -z $deb ]]; then
    t0=$(now)
    log "downloading $pkg (apt-get download, once; cached in $debs)"
    tmp=$(mktemp -d "$debs/.dl.XXXXXX")
    # apt runs the download as user _apt, which cannot write into a root-only
    # cache dir; it falls back with a warning, harmless here. Silence just that.
    (cd "$tmp" && apt-get download -q "$pkg" 2>&1 | grep -v 'unsandboxed as root' >&2) ||
      { rm -rf "$tmp"; die "apt-get download $pkg failed"; }
    mv "$tmp"/*.deb "$debs"/
    rm -rf "$tmp"
    deb=$(find "$debs" -name "${pkg}_*.deb" | sort -V | tail -1)
    log "downloaded $(basename "$deb") in $(since "$t0")s"
  fi
  echo "$deb"
}

# modinfo_depends KO: the comma-separated depends= field of a module file.
# (No kmod on these hosts, and the .deb has no modules.dep: depmod makes that
# at install time. The .modinfo section is NUL-separated key=value strings.)
modinfo_depends() {
  case $1 in
    *.ko.xz) xz -dc "$1" ;;
    *.ko.zst) zstd -qdc "$1" ;;
    *) cat "$1" ;;
  esac | tr '\0' '\n' | grep -a -m1 '^depends=' | cut -d= -f2 || true
}

# pick_modules TREE OUT: copy $RXEVM_MODULES and their dependencies from the
# extracted package TREE into OUT/modules, writing OUT/modules.order.
pick_modules() {
  local tree=$1 out=$2 kdir f n
  kdir=$(echo "$tree"/lib/modules/*)
  declare -gA KO=() SEEN=()
  ORDER=()
  # Index every module by its name; in depends= a name uses '_' where the
  # file name may use '-'.
  while IFS= read -r f; do
    n=$(basename "$f"); n=${n%%.ko*}; n=${n//-/_}
    KO[$n]=$f
  done < <(find "$kdir/kernel" -name '*.ko*')

  resolve() {
    local name=${1//-/_} dep
    [[ -n ${SEEN[$name]:-} ]] && return
    SEEN[$name]=1
    if [[ -z ${KO[$name]:-} ]]; then
      grep -q "/${name}.ko\$" "$kdir/modules.builtin" 2>/dev/null ||
        grep -q "/${1}.ko\$" "$kdir/modules.builtin" 2>/dev/null ||
        die "module $1 is neither in the package nor built in"
      return # built into the kernel
    fi
    local deps
    deps=$(modinfo_depends "${KO[$name]}")
    for dep in ${deps//,/ }; do resolve "$dep"; done
    ORDER+=("${KO[$name]}")
  }
  for n in $RXEVM_MODULES; do resolve "$n"; done

  mkdir -p "$out/modules"
  : >"$out/modules.order"
  for f in "${ORDER[@]}"; do
    n=$(basename "$f"); n=${n%.xz}; n=${n%.zst}
    case $f in
      *.xz) xz -dc "$f" >"$out/modules/$n" ;;
      *.zst) zstd -qdc "$f" >"$out/modules/$n" ;;
      *) cp "$f" "$out/modules/$n" ;;
    esac
    echo "$n" >>"$out/modules.order"
  done
}

main() {
  local pkg deb key out tmp t0
  pkg=$(kernel_package)
  deb=$(fetch_deb "$pkg")
  # One directory per package build and module list: changing RXEVM_MODULES
  # picks again from the cached .deb instead of reusing a stale selection.
  # shellcheck disable=SC2086 # one line per module name
  key=$(printf '%s\n' "$(basename "$deb" .deb)" $RXEVM_MODULES | sha256sum | cut -c1-12)
  out=$RXEVM_CACHE/kernel/${pkg#linux-image-}-$key
  if [[ ! -e $out/.complete ]]; then
    t0=$(now)
    rm -rf "$out"
    tmp=$(mktemp -d "$RXEVM_CACHE/.extract.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    # Only the kernel image and the module tree: the package is mostly modules,
    # and we keep a handful of them.
    dpkg-deb --fsys-tarfile "$deb" |
      tar -x -C "$tmp" --wildcards './boot/vmlinuz-*' './lib/modules/*' \
        --exclude='./lib/modules/*/kernel/drivers/gpu' \
        --exclude='./lib/modules/*/kernel/sound'
    mkdir -p "$out"
    cp "$tmp"/boot/vmlinuz-* "$out/vmlinuz"
    pick_modules "$tmp" "$out"
    rm -rf "$tmp"
    trap - EXIT
    touch "$out/.complete"
    log "kernel ${pkg#linux-image-}: extracted $(wc -l <"$out/modules.order") modules in $(since "$t0")s: $(sed 's/\.ko$//' "$out/modules.order" | tr '\n' ' ')"
  fi
  echo "$out"
}

main "$@"
