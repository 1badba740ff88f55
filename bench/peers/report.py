"""Joins the results of one bench/run.sh into the ratio table.

Reads, from the results directory:
  rope_bench.json, sinusoidal_bench.json, observations_bench.json
      Google Benchmark JSON of the Phasor programs (median of repetitions)
  rope_peer.json, sinusoidal_peer.json     PyTorch peers, glibc malloc tuned
      so freed memory is reused (no page faults per call: PyTorch at its best)
  rope_peer_default.json, sinusoidal_peer_default.json   the same peers with
      the default allocator (fresh pages every call), headline sizes only
  calendar_peer.json                       pandas peer
  panel_bench.json, panel_peer.json        workload P in core, and pandas
  load.json, load_warm.json                bench/phasor_load, as shipped (tcmalloc)
                                           and glibc twins with the allocator warm
  check.txt                                output of the check step (ACCURACY lines)
  machine.txt                              what the run was on
and prints a Markdown report: one table per family, then the targets
with the measured ratio and whether each is met. Ratios are the claim;
absolute times belong to the machine.
"""
import json
import os
import re
import sys

TARGETS_NOTE = "ratio > 1 means Phasor is faster, except where a column says otherwise"


def load_gbench(path):
    """name -> seconds (median aggregate when present, else a peer's only
    aggregate (panel_peer.py writes its best, "min"), else the iteration)."""
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        data = json.load(f)
    unit = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
    out, medians, others = {}, {}, {}
    for b in data.get("benchmarks", []):
        name = b["name"].replace("/real_time", "")
        seconds = b["real_time"] * unit[b.get("time_unit", "ns")]
        if b.get("run_type") == "aggregate":
            aggregate = b.get("aggregate_name")
            name = re.sub(f"_{aggregate}$", "", name)
            if aggregate == "median":
                medians[name] = seconds
            elif aggregate == "min":
                others[name] = seconds
        elif name not in out:
            out[name] = seconds
    out.update(others)
    out.update(medians)
    return out


def load_rows(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return json.load(f).get("benchmarks", [])


def load_accuracy(path):
    acc = {}
    if os.path.exists(path):
        for line in open(path):
            if line.startswith("ACCURACY "):
                _, name, value = line.split()
                acc[name] = float(value)
    return acc


def ms(seconds):
    if seconds is None:
        return "—"
    return f"{seconds * 1e3:.3f}" if seconds < 10 else f"{seconds * 1e3:.0f}"


def ratio(num, den):
    if num is None or den is None or den == 0:
        return None
    return num / den


def fmt_ratio(r, digits=2):
    return "—" if r is None else f"{r:.{digits}f}×"


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def threads_of(names):
    found = sorted({int(m.group(1)) for n in names for m in [re.search(r"threads=(\d+)", n)] if m})
    return found or [1]


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: report.py RESULTS_DIR")
    d = sys.argv[1]
    rope = load_gbench(os.path.join(d, "rope_bench.json"))
    sin = load_gbench(os.path.join(d, "sinusoidal_bench.json"))
    obs = load_gbench(os.path.join(d, "observations_bench.json"))
    rope_peer = load_gbench(os.path.join(d, "rope_peer.json"))
    rope_peer_default = load_gbench(os.path.join(d, "rope_peer_default.json"))
    sin_peer = load_gbench(os.path.join(d, "sinusoidal_peer.json"))
    sin_peer_default = load_gbench(os.path.join(d, "sinusoidal_peer_default.json"))
    cal_peer = load_gbench(os.path.join(d, "calendar_peer.json"))
    loads = [("shipped (tcmalloc)", load_rows(os.path.join(d, "load.json"))),
             ("glibc, allocator warm", load_rows(os.path.join(d, "load_warm.json")))]
    panel = load_gbench(os.path.join(d, "panel_bench.json"))
    panel_peer = load_gbench(os.path.join(d, "panel_peer.json"))
    acc = load_accuracy(os.path.join(d, "check.txt"))
    out = []
    summary = []  # (target, config, value text, met)

    if os.path.exists(os.path.join(d, "machine.txt")):
        out.append("## Machine\n\n```\n" + open(os.path.join(d, "machine.txt")).read().strip()
                   + "\n```\n")

    # ---------------------------------------------------------------- RoPE
    threads = threads_of(rope)
    sizes = sorted({int(m.group(1)) for n in rope for m in [re.search(r"^rope/.*T=(\d+)/", n)] if m})
    rows = []
    for th in threads:
        for dtype in ("fp32", "bf16"):
            for layout in ("half", "interleaved"):
                for scaling in ("none", "yarn"):
                    for pos in ("contiguous", "scattered"):
                        for t in sizes:
                            base = (f"rope/dtype={dtype}/layout={layout}/scaling={scaling}"
                                    f"/pos={pos}/T={t}/threads={th}")
                            p = rope.get(base)
                            if p is None:
                                continue
                            copy = rope.get(f"copy/dtype={dtype}/T={t}/threads={th}")
                            cached = rope_peer.get(base + "/impl=torch_cached")
                            uncached = rope_peer.get(base + "/impl=torch_uncached")
                            default = rope_peer_default.get(base + "/impl=torch_cached")
                            rows.append([dtype, layout, scaling, pos, t, th, ms(p),
                                         fmt_ratio(ratio(copy, p)),
                                         ms(cached), fmt_ratio(ratio(cached, p), 1),
                                         ms(uncached), fmt_ratio(ratio(uncached, p), 1),
                                         fmt_ratio(ratio(default, p), 0)])
                            headline = (dtype == "fp32" and layout == "half" and
                                        scaling == "none" and pos == "contiguous")
                            if headline and t >= 4096:
                                r = ratio(copy, p)
                                if r is not None:
                                    summary.append((
                                        "RoPE fp32 [T,32,128] ≥ 0.8× memory-copy bandwidth",
                                        f"T={t}, {th} thread(s)", f"{r:.2f}×", r >= 0.8))
                                r = ratio(cached, p)
                                if r is not None:
                                    summary.append((
                                        "RoPE fp32 ≥ 10× PyTorch eager (HF rotate_half, "
                                        "cos/sin cached, allocator warm)",
                                        f"T={t}, {th} thread(s)", f"{r:.1f}×", r >= 10))
                                r = ratio(default, p)
                                if r is not None:
                                    summary.append((
                                        "RoPE fp32 ≥ 10× PyTorch eager (HF rotate_half, "
                                        "cos/sin cached, default allocator)",
                                        f"T={t}, {th} thread(s)", f"{r:.0f}×", r >= 10))
    if rows:
        out.append("## RoPE apply, [T, 32, 128], out of place\n")
        out.append("× copy = memory-copy time / RoPE time over the same bytes (the "
                   "fraction of copy bandwidth RoPE reaches). × torch = PyTorch time / "
                   "Phasor time. torch cached: HF `apply_rotary_pos_emb` with cos/sin "
                   "precomputed; uncached: HF's per-call `LlamaRotaryEmbedding.forward` "
                   "plus the rotation (GPT-J's `rotate_every_two` for INTERLEAVED). "
                   "Both with freed memory reused by malloc; the last column is the "
                   "cached peer with glibc's default allocator (fresh pages, and page "
                   "faults, on every call).\n")
        out.append(table(["dtype", "layout", "scaling", "positions", "T", "threads",
                          "Phasor ms", "× copy", "torch cached ms", "× torch cached",
                          "torch uncached ms", "× torch uncached",
                          "× torch cached (default malloc)"], rows))
        tables = [[t, th, ms(rope.get(f"rope_tables/T={t}/threads={th}"))]
                  for th in threads for t in sizes if f"rope_tables/T={t}/threads={th}" in rope]
        if tables:
            out.append("\nRopeTables (cos and sin [T, 64]) alone:\n")
            out.append(table(["T", "threads", "Phasor ms"], tables))
        accs = [[k.replace("ACCURACY ", ""), f"{v:.2e}"] for k, v in sorted(acc.items())
                if k.startswith("rope/")]
        if accs:
            out.append("\nMax |output − float64 reference| at T = 4096 (inputs on [−1, 1)):\n")
            out.append(table(["configuration / implementation", "max error"], accs))
        out.append("")

    # ---------------------------------------------------------- sinusoidal
    rows = []
    for th in threads_of(sin):
        for key in sorted({re.sub(r"/out=\w+/threads=\d+$", "", n) for n in sin
                           if n.startswith("sinusoidal/")}):
            size = key.replace("sinusoidal/", "")
            reused = sin.get(f"{key}/out=reused/threads={th}")
            fresh = sin.get(f"{key}/out=fresh/threads={th}")
            fill = sin.get(f"fill/{size}/threads={th}")
            seed = sin_peer.get(f"{key}/threads={th}/impl=torch_seed")
            seed_default = sin_peer_default.get(f"{key}/threads={th}/impl=torch_seed")
            numpy32 = sin_peer.get(f"{key}/threads=1/impl=numpy_f32")
            rows.append([size, th, ms(reused), ms(fresh), ms(fill), ms(seed),
                         fmt_ratio(ratio(seed, reused), 1), ms(seed_default),
                         fmt_ratio(ratio(seed_default, fresh), 1),
                         fmt_ratio(ratio(numpy32, reused), 1) if th == 1 else "—"])
            r = ratio(seed, reused)
            if r is not None:
                summary.append(("Sinusoidal table ≥ 5× the seed's PyTorch code "
                                "(allocator warm, output buffer reused)",
                                f"{size}, {th} thread(s)", f"{r:.1f}×", r >= 5))
            r = ratio(seed_default, fresh)
            if r is not None:
                summary.append(("Sinusoidal table ≥ 5× the seed's PyTorch code "
                                "(both allocate the output every call)",
                                f"{size}, {th} thread(s)", f"{r:.1f}×", r >= 5))
    if rows:
        out.append("## Sinusoidal table, positions 0..N−1, float32\n")
        out.append("Phasor reused: into a buffer the caller keeps; fresh: into memory "
                   "allocated for the call (first touch, page faults included). fill: "
                   "memset of the same bytes (the write-bandwidth limit). torch seed: the "
                   "seed texts' PyTorch snippet (torch.zeros + float32 sin/cos, strided "
                   "stores), with malloc reusing freed memory; default malloc: fresh pages "
                   "every call, compared with Phasor fresh.\n")
        out.append(table(["N/d", "threads", "Phasor reused ms", "Phasor fresh ms",
                          "fill ms", "torch seed ms", "× torch seed", "torch seed "
                          "default malloc ms", "× (both fresh)", "× numpy f32"], rows))
        accs = [[k, f"{v:.2e}"] for k, v in sorted(acc.items()) if k.startswith("sinusoidal/")]
        if accs:
            out.append("\nMax |value − long-double reference| over the whole table:\n")
            out.append(table(["table / implementation", "max error"], accs))
            for key in sorted({k.rsplit("/impl=", 1)[0] for k, _ in accs}):
                ours = acc.get(f"{key}/impl=phasor")
                theirs = acc.get(f"{key}/impl=torch_seed_f32")
                if ours is not None and theirs is not None:
                    summary.append(("… at equal or better accuracy", key.replace(
                        "sinusoidal/", ""), f"{ours:.1e} vs {theirs:.1e}", ours <= theirs))
        out.append("")

    # ------------------------------------------------------------ calendar
    rows = []
    for th in threads_of(obs):
        for n in sorted({int(m.group(1)) for k in obs for m in [re.search(r"^calendar/N=(\d+)", k)] if m}):
            p = obs.get(f"calendar/N={n}/threads={th}")
            pandas = cal_peer.get(f"calendar/N={n}/threads={th}/impl=pandas")
            rows.append([n, th, ms(p), ms(pandas), fmt_ratio(ratio(pandas, p), 1)])
            r = ratio(pandas, p)
            if r is not None:
                summary.append(("Calendar features in a DST zone ≥ 10× pandas",
                                f"N={n}, {th} thread(s)", f"{r:.1f}×", r >= 10))
    if rows:
        out.append("## Calendar features, America/New_York, nine fields CYCLIC (18 columns)\n")
        out.append("pandas: DatetimeIndex(UTC).tz_convert + dt accessors (second, minute, "
                   "hour, dayofweek, day, dayofyear, isocalendar, month, quarter, "
                   "days_in_month, is_leap_year) and numpy sin/cos; single-threaded, so "
                   "the same pandas time is the peer for every thread count.\n")
        out.append(table(["events", "threads", "Phasor ms", "pandas ms", "× pandas"], rows))
        out.append("")
    rows = []
    for th in threads_of(obs):
        for kind in ("observations", "observations_long"):
            for n in sorted({int(m.group(1)) for k in obs for m in [re.search(rf"^{kind}/N=(\d+)", k)] if m}):
                p = obs.get(f"{kind}/N={n}/threads={th}")
                if p:
                    rows.append([kind.replace("observations_long", "long").replace(
                        "observations", "wide"), n, th, ms(p), f"{n / p / 1e6:.3f}"])
    if rows:
        out.append("## Observations, 8 channels, every block on (87 columns)\n")
        out.append(table(["layout", "events", "threads", "Phasor ms", "M events/s"], rows))
        out.append("")

    # ---------------------------------------------------------------- RPC
    for label, load in loads:
        if not load:
            continue
        by = {r["name"]: r for r in load}
        rows = []
        for r in load:
            m = re.match(r"rpc/method=(\w+)/payload=(\d+)/mode=(\w+)", r["name"])
            method, payload, mode = m.group(1), int(m.group(2)), m.group(3)
            echo = by.get(f"rpc/method=echo/payload={payload}/mode={mode}")
            lat = ratio(r["p50_ns"], echo["p50_ns"]) if echo else None
            qps = ratio(r["qps"], echo["qps"]) if echo else None
            rows.append([method, payload, mode, r.get("concurrency", 1),
                         r["request_bytes"], r["response_bytes"], f"{r['qps']:.0f}",
                         f"{r['p50_ns'] / 1e6:.3f}", f"{r['p90_ns'] / 1e6:.3f}",
                         f"{r['p99_ns'] / 1e6:.3f}",
                         "—" if method == "echo" else fmt_ratio(lat),
                         "—" if method == "echo" else fmt_ratio(qps)])
            if method == "echo":
                continue
            if mode == "latency" and payload == 1 << 20 and lat is not None:
                summary.append((f"RPC: 1 MiB encode call ≤ 1.25× echo latency (p50), {label}",
                                method, f"{lat:.2f}×", lat <= 1.25))
            if mode == "throughput" and payload <= 1024 and qps is not None:
                summary.append((f"RPC: small calls ≥ 0.8× echo QPS, {label}",
                                f"{method}, {payload} B", f"{qps:.2f}×", qps >= 0.8))
        out.append(f"## RPC over 127.0.0.1, {label}: encoders against Echo of the same bytes\n")
        out.append("latency mode: one connection, one call in flight; throughput mode: "
                   "several connections, closed loop. × echo p50 = encoder p50 / echo p50 "
                   "(lower is better); × echo QPS = encoder QPS / echo QPS (higher is "
                   "better).\n")
        out.append(table(["method", "payload B", "mode", "in flight", "request B",
                          "response B", "QPS", "p50 ms", "p90 ms", "p99 ms", "× echo p50",
                          "× echo QPS"], rows))
        out.append("")

    # ------------------------------------------------- host-limit targets
    limits = host_limit_targets(rope, obs, panel, panel_peer, rope_peer, loads)
    if limits:
        host = ""
        machine = os.path.join(d, "machine.txt")
        if os.path.exists(machine):
            host = next((line.split(":", 1)[1].strip() for line in open(machine)
                         if line.startswith("host class:")), "")
        out.append("## Targets against this host's limits, measured in this run\n")
        out.append(f"Host class: {host or 'not recorded'}. Each ratio's two sides ran "
                   "in this run on this host: Highway's own Sin and Cos in a bare "
                   "loop over the same number of angles (`limit/sincos_f64/...`), a "
                   "memcpy of the same bytes, pandas, PyTorch, Echo.\n")
        out.append(table(["target", "configuration", "measured", "met"],
                         [[t, c, v, "yes" if ok else "**no**"] for t, c, v, ok in limits]))
        out.append("")

    # ------------------------------------------------------------ summary
    if summary:
        out.append("## Targets\n")
        out.append(table(["target", "configuration", "measured", "met"],
                         [[t, c, v, "yes" if ok else "**no**"] for t, c, v, ok in summary]))
        out.append("")
    print("\n".join(out))


def host_limit_targets(rope, obs, panel, panel_peer, rope_peer, loads):
    """(target, configuration, measured text, met) of the kernel targets
    stated as ratios to limits measured in the same run."""
    rows = []

    def add(target, config, value, goal, higher_is_better=True, digits=2):
        if value is not None:
            met = value >= goal if higher_is_better else value <= goal
            rows.append((target, config, f"{value:.{digits}f}×", met))

    # Throughputs of equal row counts: limit time / block time.
    for n in (100000, 1000000):
        add("time sinusoid (dim 16) ≥ 0.7× Highway sin/cos of its angles, f64",
            f"N={n}, 1 thread",
            ratio(obs.get(f"limit/sincos_f64/for=time/N={n}/threads=1"),
                  obs.get(f"block/time/spacing=two_years/N={n}/threads=1")), 0.7)
    for n in sorted({int(m.group(1)) for k in obs
                     for m in [re.search(r"^limit/sincos_f64/for=observations/N=(\d+)/", k)] if m}):
        add("every block on ≥ 0.5× Highway sin/cos of its angles (21 pairs a row), f64",
            f"N={n}, 1 thread",
            ratio(obs.get(f"limit/sincos_f64/for=observations/N={n}/threads=1"),
                  obs.get(f"observations/N={n}/threads=1")), 0.5)
    spacings = [obs.get(f"block/calendar/spacing={s}/N=100000/threads=1")
                for s in ("two_years", "dense", "sparse")]
    if all(spacings):
        add("calendar block: slowest spacing ÷ fastest ≤ 1.2×",
            "two years, dense, sparse; N=100000, 1 thread",
            max(spacings) / min(spacings), 1.2, higher_is_better=False)
    pandas = next((v for k, v in panel_peer.items() if k.endswith("/impl=pandas")), None)
    add("workload P core ≥ 20× pandas, 1 thread", "10^6 rows, 21 columns",
        ratio(pandas, panel.get("panel/threads=1")), 20, digits=1)
    threads = threads_of(rope)
    for dtype in ("bf16", "fp16"):
        for t in (4096, 32768):
            th = max(threads)
            add(f"RoPE {dtype} ≥ 0.9× a copy of the same bytes, T ≥ 4096, the host's cores",
                f"T={t}, {th} thread(s), plan cached",
                ratio(rope.get(f"copy/dtype={dtype}/T={t}/threads={th}"),
                      rope.get(f"rope/dtype={dtype}/layout=half/scaling=none/pos=contiguous"
                               f"/T={t}/freq=cached/threads={th}")), 0.9)
    for th in threads:
        add("RoPE bf16 ≥ 8× PyTorch bf16 (HF rotate_half, cos/sin cached)",
            f"T=128, {th} thread(s), plan cached",
            ratio(rope_peer.get("rope/dtype=bf16/layout=half/scaling=none/pos=contiguous"
                                f"/T=128/threads={th}/impl=torch_cached"),
                  rope.get("rope/dtype=bf16/layout=half/scaling=none/pos=contiguous"
                           f"/T=128/freq=cached/threads={th}")), 8, digits=1)
    for dtype in ("fp32", "bf16"):
        add(f"RoPE {dtype} one token ≥ 20× PyTorch (HF rotate_half, cos/sin cached)",
            "T=1 at position 4096, 1 thread",
            ratio(rope_peer.get(f"rope/dtype={dtype}/layout=half/scaling=none/pos=contiguous"
                                "/T=1/threads=1/impl=torch_cached"),
                  rope.get(f"rope/dtype={dtype}/layout=half/scaling=none/pos=decode"
                           "/T=1/freq=cached/threads=1")), 20, digits=1)
    for label, load in loads:
        by = {r["name"]: r for r in load}
        obs_row = by.get("rpc/method=encode_observations/payload=1024/mode=throughput")
        echo_row = by.get("rpc/method=echo/payload=1024/mode=throughput")
        if obs_row and echo_row:
            add("EncodeObservations 1 KiB ≥ 0.95× Echo QPS", label,
                ratio(obs_row["qps"], echo_row["qps"]), 0.95)
    return rows


if __name__ == "__main__":
    main()
