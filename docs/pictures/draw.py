#!/usr/bin/python3
"""Draws the pictures of the docs from a real phasor-server's answers.

    /usr/bin/python3 docs/pictures/draw.py                   # starts build/server/phasor-server
    /usr/bin/python3 docs/pictures/draw.py --target HOST:PORT   # a running server
    /usr/bin/python3 docs/pictures/draw.py --out /tmp/pictures

Every number plotted comes from the server through the Python client
(client/python, as CMake's phasor_python target lays it out in
build/python); nothing is recomputed here. Three figures:

  sinusoidal.png  EncodePositions' table [128, 64] as a heatmap, and the
                  similarity curve Σ_j cos(ω_j·k) that Describe reports.
  rope.png        ApplyRope of one head (D = 64, HALF pairing) holding
                  (1, 0) in every pair, across positions 0..511, under no
                  scaling, linear, ntk and yarn (factor 4): column i is
                  cos(θ_i·t), column i + 32 sin(θ_i·t), times YaRN's
                  attention factor.
  calendar.png    EncodeObservations of one week of irregular observations
                  in Europe/Berlin across the 2026-03-29 DST change: the
                  fractional hour of day, the UTC offset and DST flag, and
                  the global and per-channel gaps (GRU-D δ).

Prints one JSON object on stdout: per figure, its file, the SHA-256 of the
float32 bytes of each array plotted (as the server sent them) and a few
values, so a test can compare them with its own call to the server.
Uses Debian's python3-matplotlib (Agg backend, no display).
"""

import argparse
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
LOOPBACK = "127.0.0.1"
STARTUP_TIMEOUT_S = 30.0
DEADLINE_S = 30.0

# The inputs of each figure; a test reuses them to make its own calls.
SINUSOIDAL = {"count": 128, "dim": 64, "num_offsets": 128}
ROPE_POSITIONS = 512
ROPE_HEAD_DIM = 64
ROPE_SCALINGS = {
    "none": None,
    "linear, factor 4": {"linear": {"factor": 4.0}},
    "ntk, factor 4": {"ntk": {"factor": 4.0}},
    "yarn, factor 4": {"yarn": {"factor": 4.0,
                                "original_max_position_embeddings": 128}},
}
ZONE = "Europe/Berlin"
WEEK_START_NS = 1774396800 * 10**9  # 2026-03-25T00:00:00Z; DST starts 03-29.
CALENDAR_SPEC = {
    "calendar": {"time_zone": ZONE, "fields": ["hour_of_day", "day_of_week"],
                 "fractional": True, "include_utc_offset": True,
                 "include_dst": True},
    "gaps": {"global_delta": True, "per_channel_delta": True,
             "unit_seconds": 3600.0},
}
CHANNELS = ["heart_rate", "temperature"]


def rope_query():
    """One token, one head: (1, 0) in every HALF pair (i, i + D/2)."""
    query = np.zeros((ROPE_POSITIONS, 1, ROPE_HEAD_DIM), np.float32)
    query[:, 0, :ROPE_HEAD_DIM // 2] = 1.0
    return query


def week_of_observations():
    """Irregular times (seeded) over seven days and two channels, each
    missing about a third of the time: (timestamps_ns [T], values [T, 2])."""
    rng = np.random.default_rng(20260329)
    gaps_s = rng.exponential(scale=3600.0, size=400).astype(np.int64) + 60
    times = WEEK_START_NS + np.cumsum(gaps_s) * 10**9
    times = times[times < WEEK_START_NS + 7 * 86400 * 10**9]
    values = rng.normal(loc=[70.0, 37.0], scale=[8.0, 0.4],
                        size=(len(times), 2))
    values[rng.random(values.shape) < 0.35] = np.nan
    return times, values


def digest(array):
    return hashlib.sha256(
        np.ascontiguousarray(array, dtype=np.float32).tobytes()).hexdigest()


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


class Server:
    """phasor-server on a free loopback port, stopped by its pid."""

    def __init__(self, binary, client_module):
        self.binary, self.client_module = binary, client_module
        self.process, self.target = None, None

    def __enter__(self):
        port = free_port()
        self.target = f"{LOOPBACK}:{port}"
        self.log = tempfile.TemporaryFile(mode="w+")
        self.process = subprocess.Popen(
            [self.binary, f"--grpc_address={self.target}",
             "--metrics_address="], stdout=self.log,
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.log.seek(0)
                raise RuntimeError(f"phasor-server exited with "
                                   f"{self.process.returncode}:\n"
                                   f"{self.log.read()}")
            try:
                with self.client_module.EncoderClient(
                        self.target, deadline_seconds=2.0) as client:
                    if client.health() == "SERVING":
                        return self
            except Exception:  # Not listening or not SERVING yet.
                pass
            time.sleep(0.05)
        self.__exit__()
        raise RuntimeError(f"phasor-server not SERVING after "
                           f"{STARTUP_TIMEOUT_S} s")

    def __exit__(self, *exc_info):
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=30)
        self.log.close()


# -- the server's answers ---------------------------------------------------

def fetch_sinusoidal(client):
    table = client.encode_positions(count=SINUSOIDAL["count"],
                                    dim=SINUSOIDAL["dim"])
    info = client.describe(dim=SINUSOIDAL["dim"],
                           num_offsets=SINUSOIDAL["num_offsets"])
    return table, np.array(info.similarity), info


def fetch_rope(client):
    rotated = {}
    for name, scaling in ROPE_SCALINGS.items():
        result = client.apply_rope(rope_query(), rotary_dim=ROPE_HEAD_DIM,
                                   scaling=scaling,
                                   max_position_embeddings=ROPE_POSITIONS)
        rotated[name] = (result.query[:, 0, :], result.attention_factor)
    return rotated


def fetch_calendar(client, feature_names):
    times, values = week_of_observations()
    result = client.encode_observations(times, values, spec=CALENDAR_SPEC,
                                        channel_names=CHANNELS)
    names = feature_names(result.schema, CHANNELS)
    return times, values, result.features, names


# -- the pictures -----------------------------------------------------------

def draw_sinusoidal(plt, table, similarity, info, path):
    figure, (left, right) = plt.subplots(
        1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [1.3, 1]})
    image = left.imshow(table, aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1,
                        interpolation="nearest")
    left.set_title(f"EncodePositions: sinusoidal, dim {table.shape[1]}, "
                   "INTERLEAVED")
    left.set_xlabel("column (sin, cos of ω_k = 10000^(−2k/d))")
    left.set_ylabel("position")
    figure.colorbar(image, ax=left, fraction=0.046)
    right.plot(np.arange(len(similarity)), similarity, color="#1f5fa8")
    right.axhline(0, color="0.6", linewidth=0.8)
    right.set_title("Describe: similarity Σ_j cos(ω_j·k)")
    right.set_xlabel("offset k (positions)")
    right.set_ylabel("dot product of codes t and t + k")
    right.annotate(f"nearest code: k = {info.nearest_code_offset}, "
                   f"distance {info.nearest_code_distance:.3f}",
                   xy=(0.97, 0.95), xycoords="axes fraction", ha="right",
                   va="top", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=80)
    plt.close(figure)


def draw_rope(plt, rotated, path):
    figure, axes = plt.subplots(1, len(rotated), figsize=(13, 4.2),
                                sharey=True)
    for axis, (name, (head, factor)) in zip(axes, rotated.items()):
        image = axis.imshow(head, aspect="auto", cmap="RdBu_r",
                            vmin=-1.2, vmax=1.2, interpolation="nearest")
        title = name if factor == 1.0 else f"{name} (×{factor:.3f})"
        axis.set_title(title, fontsize=10)
        axis.set_xlabel("channel: cos | sin")
    axes[0].set_ylabel("position")
    figure.colorbar(image, ax=list(axes), fraction=0.02)
    figure.suptitle(f"ApplyRope: one head (D = {ROPE_HEAD_DIM}, HALF) "
                    "holding (1, 0) per pair")
    figure.savefig(path, dpi=80)
    plt.close(figure)


def draw_calendar(plt, times, values, features, names, path):
    import matplotlib.dates as mdates
    when = times.astype("datetime64[ns]").astype("datetime64[ms]").astype(
        object)

    def column(name):
        return features[:, names.index(name)]

    figure, axes = plt.subplots(4, 1, figsize=(11, 8.5), sharex=True)
    axes[0].plot(when, column("calendar.hour_of_day.sin"), ".-",
                 markersize=3, linewidth=0.6, label="hour_of_day sin")
    axes[0].plot(when, column("calendar.hour_of_day.cos"), ".-",
                 markersize=3, linewidth=0.6, label="hour_of_day cos")
    axes[0].set_title(f"EncodeObservations, calendar in {ZONE} "
                      "(fractional hour by the local clock)")
    axes[0].legend(loc="upper right", fontsize=8)
    axes[1].step(when, column("calendar.utc_offset"), where="post",
                 label="utc_offset (hours)")
    axes[1].step(when, column("calendar.dst"), where="post", label="dst")
    axes[1].set_title("UTC offset and DST flag: 2026-03-29 01:00Z, "
                      "clocks jump from 02:00 to 03:00")
    axes[1].legend(loc="center right", fontsize=8)
    axes[2].plot(when, column("gaps.global_delta"), ".", markersize=4)
    axes[2].set_title("gaps: global Δt since the previous row (hours)")
    for channel, marker in zip(CHANNELS, ("o", "s")):
        axes[3].plot(when, column(f"gaps.delta.{channel}"), marker,
                     markersize=3, label=f"δ {channel}")
    axes[3].set_title("gaps: per-channel δ since the channel's last "
                      "observation strictly before t (hours)")
    axes[3].legend(loc="upper right", fontsize=8)
    axes[3].xaxis.set_major_formatter(mdates.DateFormatter("%m-%d %H:%MZ"))
    axes[3].set_xlabel("UTC")
    figure.tight_layout()
    figure.savefig(path, dpi=80)
    plt.close(figure)


def draw_all(client_module, target, out_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(out_dir, exist_ok=True)
    summary = {}
    with client_module.EncoderClient(target,
                                     deadline_seconds=DEADLINE_S) as client:
        table, similarity, info = fetch_sinusoidal(client)
        path = os.path.join(out_dir, "sinusoidal.png")
        draw_sinusoidal(plt, table, similarity, info, path)
        summary["sinusoidal"] = {
            "file": path, "table_sha256": digest(table),
            "similarity": similarity[:8].tolist(),
            "similarity_sha256": digest(similarity),
            "nearest_code_offset": info.nearest_code_offset}

        rotated = fetch_rope(client)
        path = os.path.join(out_dir, "rope.png")
        draw_rope(plt, rotated, path)
        summary["rope"] = {"file": path, "heads": {
            name: {"sha256": digest(head), "attention_factor": factor,
                   "position_1_pair_0": [float(head[1, 0]),
                                         float(head[1, ROPE_HEAD_DIM // 2])]}
            for name, (head, factor) in rotated.items()}}

        times, values, features, names = fetch_calendar(
            client, client_module.feature_names)
        path = os.path.join(out_dir, "calendar.png")
        draw_calendar(plt, times, values, features, names, path)
        summary["calendar"] = {
            "file": path, "rows": int(features.shape[0]), "columns": names,
            "features_sha256": digest(features),
            "utc_offsets": sorted({float(v) for v in
                                   features[:, names.index(
                                       "calendar.utc_offset")]})}
    return summary


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--server", default=os.path.join(
        REPO, "build", "server", "phasor-server"),
        help="phasor-server binary to start (unless --target is given)")
    parser.add_argument("--target", help="host:port of a running server")
    parser.add_argument("--python_dir", default=os.path.join(
        REPO, "build", "python"),
        help="directory holding the built phasor_client package")
    parser.add_argument("--out", default=os.path.dirname(
        os.path.abspath(__file__)), help="where the PNGs go")
    args = parser.parse_args(argv)

    sys.path.insert(0, args.python_dir)
    import phasor_client

    if args.target:
        summary = draw_all(phasor_client, args.target, args.out)
    else:
        with Server(args.server, phasor_client) as server:
            summary = draw_all(phasor_client, server.target, args.out)
    json.dump(summary, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
