#!/usr/bin/env bash
# Large calls under each malloc, side by side in one run: a fresh
# phasor-server on a free 127.0.0.1 port per (round, allocator), driven by
# bench/phasor_load in latency mode (one call in flight), server and load
# generator under the same allocator:
#
#   shipped  phasor-server and phasor_load as built (PHASOR_ALLOCATOR;
#            tcmalloc unless configured otherwise), no environment
#   glibc    the glibc-linked twins (phasor-server-glibc, phasor_load_glibc),
#            glibc's malloc as configured by default
#   warm     the glibc twins with glibc told to keep freed memory
#            (MALLOC_MMAP_MAX_=0, MALLOC_TRIM_THRESHOLD_ huge): the
#            "allocator warm" setting bench/run.sh uses
#   jemalloc the glibc twins with libjemalloc.so.2 preloaded, when installed
#   tcmalloc the glibc twins with libtcmalloc_minimal.so.4 preloaded
#
# The allocators take turns round by round (--rounds), so a shared machine's
# drift spreads over all of them; each prints its per-round p50s, and
# bench/allocators_report.py (run at the end) the ranges and ratios.
#
#   bash bench/allocators.sh BUILD_DIR [ROUNDS] [PAYLOADS] [METHODS] [SECONDS]
#   bash bench/allocators.sh build 3 1048576,16777216 echo,apply_rope 2
set -euo pipefail
build=$(cd "${1:?usage: $0 BUILD_DIR [ROUNDS] [PAYLOADS] [METHODS] [SECONDS]}" && pwd)
rounds=${2:-3}
payloads=${3:-1048576,16777216}
methods=${4:-echo,encode_positions,apply_rope,encode_observations}
seconds=${5:-2}
python=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
out=${PHASOR_ALLOCATORS_OUT:-$build/bench-results/allocators-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"
lib=/usr/lib/x86_64-linux-gnu

server_glibc=$build/bench/phasor-server-glibc
load_glibc=$build/bench/phasor_load_glibc
[[ -x $server_glibc ]] || server_glibc=$build/server/phasor-server
[[ -x $load_glibc ]] || load_glibc=$build/bench/phasor_load

names=(shipped glibc warm)
declare -A prefix server load
prefix[shipped]="env"; server[shipped]=$build/server/phasor-server; load[shipped]=$build/bench/phasor_load
prefix[glibc]="env"; server[glibc]=$server_glibc; load[glibc]=$load_glibc
prefix[warm]="env MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=1000000000000000 MALLOC_TOP_PAD_=0"
server[warm]=$server_glibc; load[warm]=$load_glibc
if [[ -e $lib/libjemalloc.so.2 ]]; then
  names+=(jemalloc)
  prefix[jemalloc]="env LD_PRELOAD=$lib/libjemalloc.so.2"
  server[jemalloc]=$server_glibc; load[jemalloc]=$load_glibc
fi
if [[ -e $lib/libtcmalloc_minimal.so.4 ]] && ! readelf -d "$server_glibc" | grep -q tcmalloc; then
  names+=(tcmalloc)
  prefix[tcmalloc]="env LD_PRELOAD=$lib/libtcmalloc_minimal.so.4"
  server[tcmalloc]=$server_glibc; load[tcmalloc]=$load_glibc
fi

echo "allocators: ${names[*]}; rounds $rounds; payloads $payloads; load $(cut -d' ' -f1-3 /proc/loadavg)" |
  tee "$out/machine.txt"
server_pid=
trap '[[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null || true' EXIT
for ((round = 1; round <= rounds; round++)); do
  for name in "${names[@]}"; do
    port=$($python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    # shellcheck disable=SC2086  # prefix is a command prefix, split on purpose
    ${prefix[$name]} "${server[$name]}" --grpc_address="127.0.0.1:$port" --metrics_address= \
      --enable_echo --max_message_bytes=$((64 << 20)) 2>>"$out/server.log" &
    server_pid=$!
    # shellcheck disable=SC2086
    ${prefix[$name]} "${load[$name]}" --target="127.0.0.1:$port" --modes=latency \
      --methods="$methods" --payloads="$payloads" --seconds="$seconds" \
      --max_message_bytes=$((64 << 20)) --out="$out/$name-$round.json" 2>>"$out/load.log"
    kill "$server_pid"
    wait "$server_pid" || true
    server_pid=
    echo "round $round $name done"
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/machine.txt"
$python "$here/allocators_report.py" "$out" | tee "$out/report.md"
