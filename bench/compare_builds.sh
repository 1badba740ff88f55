#!/usr/bin/env bash
# Side by side: the core's headline benchmark lines from two build trees
# (e.g. a commit before a restructure and HEAD), run alternately, one
# thread pinned to CPU 1, so that a shared host's drift falls on both.
#
#   bash bench/compare_builds.sh BEFORE_BUILD_DIR AFTER_BUILD_DIR [ROUNDS]
#
# Each tree needs sinusoidal_bench, rope_bench, observations_bench and
# panel_bench built (cmake -DPHASOR_BUILD_BENCH=ON, Release). Prints, per
# line, the median of the rounds' medians on each side and after ÷ before
# (below 1: the after tree is faster), with the range over rounds.
set -euo pipefail
before=$1; after=$2; rounds=${3:-3}
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
common=(--phasor_threads=1 --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
        --benchmark_format=json)
declare -A filters=(
  [sinusoidal_bench]='^sinusoidal/(dtype=fp64/)?N=(4096/d=512|65536/d=1024)/out=reused/threads=1/'
  [rope_bench]='^rope/dtype=(fp32|bf16)/layout=half/scaling=none/pos=(contiguous|decode)/T=(1|4096)/freq=cached/threads=1/'
  [observations_bench]='^(observations/N=100000/threads=1/|block/(time|gaps|calendar)/spacing=two_years/N=100000/threads=1/)'
  [panel_bench]='^panel/threads=1/'
)
for round in $(seq "$rounds"); do
  for program in sinusoidal_bench rope_bench observations_bench panel_bench; do
    sizes=(); [ "$program" = observations_bench ] && sizes=(--phasor_sizes=small)
    for side in before after; do
      dir=$before; [ "$side" = after ] && dir=$after
      taskset -c 1 "$dir/bench/$program" "${common[@]}" "${sizes[@]}" \
        --benchmark_filter="${filters[$program]}" > "$out/$program.$side.$round.json"
    done
  done
done
/usr/bin/python3 - "$out" <<'PY'
import collections, glob, json, os, statistics, sys
rows = collections.defaultdict(lambda: {"before": [], "after": []})
for path in glob.glob(os.path.join(sys.argv[1], "*.json")):
    side = os.path.basename(path).split(".")[1]
    for row in json.load(open(path))["benchmarks"]:
        if row.get("aggregate_name") == "median":
            rows[row["run_name"]][side].append(row["real_time"])
for name, sides in sorted(rows.items()):
    before, after = statistics.median(sides["before"]), statistics.median(sides["after"])
    per_round = [a / b for a, b in zip(sides["after"], sides["before"])]
    print(f"{name:92s} {after / before:6.3f}  ({min(per_round):.3f}-{max(per_round):.3f})")
PY
