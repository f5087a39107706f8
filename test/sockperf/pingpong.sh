#!/bin/sh
# pingpong.sh: the software backend's ping-pong with a spin window beside
# sockperf's busy-poll UDP multicast ping-pong (`sockperf pp --nonblocked`),
# and beside connected net.UDPConn, in one network namespace, in one go,
# round after round, and the per-round ratios' medians.
#
# Run as root from the repository root (or set BENCH to a test binary built
# with `go test -c`), under the shared benchmark lock:
#
#	flock /work/bench.lock test/sockperf/pingpong.sh [rounds] [seconds]
#
# It makes its own namespace (unshare -n) unless RDMANET_IN_NETNS is set;
# nothing leaves lo. Needs sockperf (Debian package sockperf) and python3.
set -eu
export PATH="$PATH:/usr/local/go/bin"
rounds=${1:-5}
secs=${2:-2}
if [ -z "${RDMANET_IN_NETNS:-}" ]; then
	exec env RDMANET_IN_NETNS=1 unshare -n sh -c 'ip link set lo up && exec "$0" "$@"' "$0" "$rounds" "$secs"
fi
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
trap 'kill $srv 2>/dev/null || true; rm -rf "$out"' EXIT INT TERM
srv=
bench=${BENCH:-}
if [ -z "$bench" ]; then
	bench=$out/rdmanet.test
	(cd "$here/../.." && GOFLAGS=-buildvcs=false go test -c -o "$bench" .)
fi
group=239.88.250.1
port=12399
mc="--mc-rx-if 127.0.0.1 --mc-tx-if 127.0.0.1"
for r in $(seq "$rounds"); do
	# sockperf reports half round trips, in µs.
	sockperf sr -i $group -p $port $mc --nonblocked >"$out/sr.log" 2>&1 &
	srv=$!
	sleep 0.3
	for m in 64 1024 4096; do
		sockperf pp -i $group -p $port $mc --nonblocked -t "$secs" -m $m 2>&1 |
			awk -v m=$m -v r="$r" '/percentile 50.000/{p50=$NF} /percentile 99.000/{p99=$NF}
				END{printf "sockperf round=%s size=%s p50=%s p99=%s\n", r, m, p50*1000, p99*1000}'
	done >>"$out/res.txt"
	kill $srv; wait $srv 2>/dev/null || true
	srv=
	"$bench" -test.run '^$' -test.bench 'PingPong$/^(rdmanet-spin100us|rdmanet|udp-connected)$/' \
		-test.benchtime "${secs}s" -test.count 1 | grep '^Benchmark' |
		sed "s/^/bench round=$r /" >>"$out/res.txt"
done
cat "$out/res.txt"
python3 - "$out/res.txt" <<'PY'
import re, statistics as st, sys
sizes = {"64B": "64", "1KiB": "1024", "MTU4096": "4096"}
rows = {}  # (who, size) -> {round: (p50, p99)}
for line in open(sys.argv[1]):
    f = line.split()
    r = f[1].split("=")[1]
    if f[0] == "sockperf":
        d = dict(x.split("=") for x in f[1:])
        rows.setdefault(("sockperf", d["size"]), {})[r] = (float(d["p50"]), float(d["p99"]))
        continue
    name = re.sub(r"-\d+$", "", f[2]).split("/")
    if len(name) != 3 or name[2] not in sizes:
        continue
    m = {f[i + 1]: float(f[i]) for i in range(3, len(f) - 1) if re.fullmatch(r"[0-9.]+", f[i])}
    rows.setdefault((name[1], sizes[name[2]]), {})[r] = (m["p50-ns"], m["p99-ns"])
def med(who, size, k):
    return st.median(v[k] for v in rows[(who, size)].values())
def ratio(a, b, size):
    A, B = rows[(a, size)], rows[(b, size)]
    rs = [A[r][0] / B[r][0] for r in A if r in B]
    return f"{st.median(rs):.2f}x ({min(rs):.2f}-{max(rs):.2f})"
print("half round trip p50 / p99 µs, medians of rounds; ratios of p50, per round")
print("| size | sockperf --nonblocked | rdmanet Spin 100µs | rdmanet | udp-connected | spin / sockperf | spin p99 / p50 | rdmanet / udp-connected |")
print("|---|---|---|---|---|---|---|---|")
for size in ("64", "1024", "4096"):
    cells = [f"{med(w, size, 0)/1000:.2f} / {med(w, size, 1)/1000:.1f}" for w in ("sockperf", "rdmanet-spin100us", "rdmanet", "udp-connected")]
    sp = rows[("rdmanet-spin100us", size)]
    tail = st.median(v[1] / v[0] for v in sp.values())
    print(f"| {size} B | " + " | ".join(cells) + f" | {ratio('rdmanet-spin100us', 'sockperf', size)} | {tail:.1f} | {ratio('rdmanet', 'udp-connected', size)} |")
PY
