"""Joins bench/allocators.sh's phasor_load outputs (NAME-ROUND.json) into a
table: per allocator, method and payload, the range of the per-round p50
latencies and their median, and that median over Echo's under glibc warm
(the "allocator warm" reference of docs/BENCHMARKS.md).

    /usr/bin/python3 bench/allocators_report.py RESULTS_DIR
"""
import collections
import glob
import json
import os
import re
import statistics
import sys


def main(directory):
    p50 = collections.defaultdict(list)  # (allocator, method, payload) -> [ms]
    order = []
    for path in sorted(glob.glob(os.path.join(directory, "*-*.json")),
                       key=lambda p: int(re.search(r"-(\d+)\.json$", p).group(1))):
        name = re.sub(r"-\d+\.json$", "", os.path.basename(path))
        if name not in order:
            order.append(name)
        with open(path) as f:
            for row in json.load(f)["benchmarks"]:
                match = re.match(r"rpc/method=(\w+)/payload=(\d+)/mode=latency", row["name"])
                if match:
                    p50[(name, match.group(1), int(match.group(2)))].append(
                        row["p50_ns"] / 1e6)
    payloads = sorted({key[2] for key in p50})
    methods = []
    for key in p50:
        if key[1] not in methods:
            methods.append(key[1])
    print("| payload | method | allocator | p50 ms, per round | median | ÷ warm Echo |")
    print("|---|---|---|---|---|---|")
    for payload in payloads:
        reference = p50.get(("warm", "echo", payload))
        reference = statistics.median(reference) if reference else None
        for method in methods:
            for name in order:
                values = p50.get((name, method, payload))
                if not values:
                    continue
                median = statistics.median(values)
                ratio = f"{median / reference:.2f}×" if reference else "—"
                print(f"| {payload >> 20 if payload >= 1 << 20 else payload} "
                      f"{'MiB' if payload >= 1 << 20 else 'B'} | {method} | {name} | "
                      f"{', '.join(f'{v:.2f}' for v in values)} | {median:.2f} | {ratio} |")


if __name__ == "__main__":
    main(sys.argv[1])
