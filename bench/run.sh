#!/usr/bin/env bash
# Runs every Phasor benchmark next to its peers, on this machine, in one go,
# and prints the ratio table (docs/BENCHMARKS.md explains every figure).
#
#   bash bench/run.sh           the full run (several minutes, ~4 GB of RAM)
#   bash bench/run.sh --quick   small sizes, short timings (a smoke test)
#
# The host class (CPU model, the SIMD target Highway dispatches to, cores
# and threads) heads machine.txt and the report: every ratio is to limits
# measured on this host in this run (a memcpy, Highway's own sin/cos loop,
# Echo), never to figures from another machine.
#
# Steps: install the peers' packages if missing (python3-torch,
# python3-pandas; the README's deploy/install-deps.sh covers the rest), build
# the benchmark programs and the server (Release), check that Phasor and each
# peer compute the same numbers, run the Google Benchmark programs and the
# Python peers with the same inputs and thread counts, start a phasor-server
# on a free 127.0.0.1 port and drive it with bench/phasor_load, stop it by
# pid, and join everything with bench/peers/report.py.
#
# Environment (all optional):
#   PHASOR_BENCH_BUILD     build directory            (default: <repo>/build-bench)
#   PHASOR_BENCH_RESULTS   results directory          (default: <build>/bench-results/<time>)
#   PHASOR_BENCH_THREADS   thread counts, comma-separated (default: 1,<nproc>)
#   PHASOR_BENCH_MIN_TIME  seconds per repetition     (default: 0.1; --quick 0.02)
#   PHASOR_BENCH_SKIP_DEPS set to 1 to skip the package check
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
quick=0
if [[ ${1:-} == --quick ]]; then quick=1; fi

build=${PHASOR_BENCH_BUILD:-$root/build-bench}
results=${PHASOR_BENCH_RESULTS:-$build/bench-results/$(date +%Y%m%d-%H%M%S)}
cores=$(nproc)
threads=${PHASOR_BENCH_THREADS:-$( ((cores > 1)) && echo "1,$cores" || echo 1)}
python=/usr/bin/python3  # Debian's numpy/torch/pandas live here only.
peers=$root/bench/peers

if ((quick)); then
  min_time=${PHASOR_BENCH_MIN_TIME:-0.02}
  repetitions=1
  bench_sizes=(--phasor_sizes=small)
  peer_sizes=(--small)
  payloads=1024,1048576
  load_seconds=0.5
else
  min_time=${PHASOR_BENCH_MIN_TIME:-0.1}
  repetitions=3
  bench_sizes=()
  peer_sizes=()
  payloads=1024,1048576,16777216
  load_seconds=2
fi

log() { printf '\n== %s\n' "$*" >&2; }

# --- 1. Packages -------------------------------------------------------------
# The same idempotent check as deploy/install-deps.sh, for the two packages
# only the peers need (too heavy for the CI image, so not in that script).
if [[ ${PHASOR_BENCH_SKIP_DEPS:-0} != 1 ]]; then
  log "packages"
  bash "$root/deploy/install-deps.sh"
  missing=()
  for p in python3-torch python3-pandas; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$p")
    fi
  done
  if ((${#missing[@]})); then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends "${missing[@]}"
  fi
fi

# --- 2. Build ----------------------------------------------------------------
log "build ($build)"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DPHASOR_BUILD_BENCH=ON \
  -DPHASOR_BUILD_SERVER=ON -DPHASOR_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" -j"$cores" --target rope_bench sinusoidal_bench \
  observations_bench panel_bench phasor-server phasor_load phasor-server-glibc phasor_load_glibc

mkdir -p "$results"
# The host class every ratio of the run belongs to: the CPU as the kernel
# names it, the SIMD target Highway dispatches the core's kernels to on it,
# and the cores and thread counts used.
cpu_model=$(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo | head -1)
simd_target=$("$build/bench/observations_bench" --phasor_simd_target)
{
  echo "host class:  ${cpu_model:-unknown CPU}; Highway target $simd_target; $cores cores; threads $threads"
  echo "date:        $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit:      $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(
    git -C "$root" diff --quiet 2>/dev/null || echo ' (with local changes)')"
  echo "cpu:         $(lscpu | sed -n 's/^Model name: *//p' | head -1), $cores cores"
  echo "memory:      $(free -g | awk '/^Mem:/ {print $2 " GiB"}')"
  echo "kernel:      $(uname -sr)"
  echo "compiler:    $(c++ --version | head -1)"
  echo "python:      $($python -c 'import platform, numpy, torch, pandas; print(platform.python_version(), "numpy", numpy.__version__, "torch", torch.__version__, "pandas", pandas.__version__)')"
  echo "threads:     $threads"
  echo "min_time:    ${min_time}s x $repetitions repetitions (median)"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$results/machine.txt"

# --- 3. Same numbers on both sides -------------------------------------------
log "check: Phasor and the peers agree"
dump=$(mktemp -d)
trap 'rm -rf "$dump"' EXIT
"$build/bench/rope_bench" --phasor_dump="$dump"
"$build/bench/sinusoidal_bench" --phasor_dump="$dump"
"$build/bench/observations_bench" --phasor_dump="$dump"
(
  cd "$peers"
  $python rope_peer.py --check "$dump"
  $python sinusoidal_peer.py "${peer_sizes[@]}" --check "$dump"
  $python calendar_peer.py --check "$dump"
) >"$results/check.txt"
rm -rf "$dump"

# --- 4. Phasor ---------------------------------------------------------------
for program in rope_bench sinusoidal_bench observations_bench panel_bench; do
  log "$program"
  "$build/bench/$program" --phasor_threads="$threads" "${bench_sizes[@]}" \
    --benchmark_min_time="$min_time" --benchmark_repetitions="$repetitions" \
    --benchmark_report_aggregates_only=true \
    --benchmark_out="$results/$program.json" --benchmark_out_format=json
done

# --- 5. Peers ----------------------------------------------------------------
# PyTorch eager allocates a fresh output per operation. With glibc's defaults
# a large block is a fresh mmap every time and every page of it faults on
# first touch, which on some virtual machines costs ~10 µs a page. The main
# peer runs therefore keep freed memory in the heap (no mmap, no trimming):
# PyTorch at its best. The *_default runs repeat the headline sizes with the
# stock allocator for comparison.
warm=(env MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=1000000000000000 MALLOC_TOP_PAD_=0)
peer_args=(--threads "$threads" --min_time "$min_time" --repetitions "$repetitions")
cd "$peers"
log "PyTorch RoPE peer"
"${warm[@]}" $python rope_peer.py "${peer_args[@]}" "${peer_sizes[@]}" --out "$results/rope_peer.json"
log "PyTorch RoPE peer, default allocator, headline configuration"
$python rope_peer.py "${peer_args[@]}" "${peer_sizes[@]}" \
  --filter 'dtype=fp32/layout=half/scaling=none/pos=contiguous/T=(128|4096)/.*impl=torch_cached' \
  --out "$results/rope_peer_default.json"
log "PyTorch sinusoidal peer"
"${warm[@]}" $python sinusoidal_peer.py "${peer_args[@]}" "${peer_sizes[@]}" \
  --out "$results/sinusoidal_peer.json"
log "PyTorch sinusoidal peer, default allocator"
$python sinusoidal_peer.py "${peer_args[@]}" "${peer_sizes[@]}" --filter 'impl=torch_seed' \
  --out "$results/sinusoidal_peer_default.json"
log "pandas calendar peer"
$python calendar_peer.py "${peer_args[@]}" "${peer_sizes[@]}" --out "$results/calendar_peer.json"
log "pandas workload P peer (panel_bench's core figure)"
$python panel_peer.py --pandas_only --repetitions "$repetitions" --out "$results/panel_peer.json"
cd "$root"

# --- 6. Transport ------------------------------------------------------------
# Twice: the programs as shipped (linked with tcmalloc, PHASOR_ALLOCATOR; no
# environment), and their glibc-linked twins with the warm settings above on
# both server and load generator (freed buffers reused), the reference the
# design's RPC targets were first measured against. bench/allocators.sh adds
# glibc's default, jemalloc and tcmalloc preloaded, side by side.
run_load() {  # $1: output file; $2: program suffix ("" or _glibc); the rest: command prefix
  local out=$1 server=$build/server/phasor-server load=$build/bench/phasor_load
  if [[ $2 == _glibc ]]; then
    server=$build/bench/phasor-server-glibc load=$build/bench/phasor_load_glibc
  fi
  shift 2
  local port
  port=$($python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$@" "$server" --grpc_address="127.0.0.1:$port" --metrics_address= \
    --enable_echo --max_message_bytes=$((64 << 20)) --threads="$cores" \
    2>>"$results/server.log" &
  server_pid=$!
  trap 'kill "$server_pid" 2>/dev/null || true; rm -rf "$dump"' EXIT
  "$@" "$load" --target="127.0.0.1:$port" --payloads="$payloads" \
    --seconds="$load_seconds" --max_message_bytes=$((64 << 20)) --out="$out"
  kill "$server_pid"
  wait "$server_pid" || true
  trap 'rm -rf "$dump"' EXIT
}
log "RPC: encoders against Echo on 127.0.0.1, as shipped (tcmalloc)"
run_load "$results/load.json" "" env
log "RPC: encoders against Echo on 127.0.0.1, glibc with the allocator warm"
run_load "$results/load_warm.json" _glibc "${warm[@]}"

echo "load after:  $(cut -d' ' -f1-3 /proc/loadavg)" >>"$results/machine.txt"

# --- 7. Report ---------------------------------------------------------------
log "report ($results/report.md)"
$python "$peers/report.py" "$results" | tee "$results/report.md"
