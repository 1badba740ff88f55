"""Peer of bench/observations_bench.cc's calendar/N=... benchmarks: calendar
features in America/New_York with pandas (tz_convert and the dt accessors)
and numpy for the sin/cos.

Timed: int64 ns timestamps in, float32 [N, 18] out — second, minute, hour,
day of week (Monday = 0), day of month, day of year, ISO week, month, quarter,
each as (sin, cos) of 2π·x/P with x zero-based and P calendar-true (days in
that month, 365/366 days in that year, 52/53 ISO weeks in that ISO year), the
column order of Phasor's CYCLIC calendar block (core/calendar.h).

Timestamps are observations_bench.cc's: N events over 730 days from
2023-01-01T00:00:00Z, t_i = start + i·step + (hash(i) mod step).
"""
import math
import sys

import numpy as np
import pandas as pd

import common

ZONE = "America/New_York"
START_NS = 1672531200 * 10**9
SPAN_NS = 730 * 86400 * 10**9
SIZES = [10**4, 10**5, 10**6]


def timestamps(n):
    step = SPAN_NS // n
    i = np.arange(n, dtype=np.uint64)
    hashed = (i * np.uint64(2654435761)) & np.uint64(0xFFFFFFFF)
    return (np.int64(START_NS) + i.astype(np.int64) * np.int64(step)
            + (hashed % np.uint64(step)).astype(np.int64))


def iso_weeks_in_year(year):
    """52 or 53: a year has 53 ISO weeks iff it starts on a Thursday, or is a
    leap year starting on a Wednesday (equivalently p(y) == 4 or p(y−1) == 3
    with p(y) = (y + ⌊y/4⌋ − ⌊y/100⌋ + ⌊y/400⌋) mod 7)."""
    def p(y):
        return (y + y // 4 - y // 100 + y // 400) % 7
    return np.where((p(year) == 4) | (p(year - 1) == 3), 53, 52)


def calendar_features(ns):
    local = pd.DatetimeIndex(ns.view("datetime64[ns]"), tz="UTC").tz_convert(ZONE)
    iso = local.isocalendar()
    days_in_year = np.where(local.is_leap_year, 366, 365)
    columns = [  # (x, P)
        (local.second.to_numpy(), 60),
        (local.minute.to_numpy(), 60),
        (local.hour.to_numpy(), 24),
        (local.dayofweek.to_numpy(), 7),
        (local.day.to_numpy() - 1, local.days_in_month.to_numpy()),
        (local.dayofyear.to_numpy() - 1, days_in_year),
        (iso["week"].to_numpy(dtype=np.int64) - 1,
         iso_weeks_in_year(iso["year"].to_numpy(dtype=np.int64))),
        (local.month.to_numpy() - 1, 12),
        (local.quarter.to_numpy() - 1, 4),
    ]
    out = np.empty((len(ns), 2 * len(columns)), dtype=np.float32)
    for j, (x, period) in enumerate(columns):
        angle = (2 * math.pi) * x / period
        out[:, 2 * j] = np.sin(angle)
        out[:, 2 * j + 1] = np.cos(angle)
    return out


def check(directory):
    n = 10**4
    phasor = common.load_raw(directory, f"calendar_N{n}.bin", np.float32, (n, 18))
    peer = calendar_features(timestamps(n))
    # Both take sin/cos in double of the same angle and round to float32.
    return common.check_close(f"calendar/N={n} phasor vs pandas", phasor, peer, atol=1e-6)


def main():
    args = common.parser(__doc__.splitlines()[0]).parse_args()
    if args.check:
        sys.exit(0 if check(args.check) else 1)
    sizes = SIZES[:2] if args.small else SIZES
    results = common.Results(args)
    # pandas' datetime accessors and numpy's ufuncs run on one thread: the
    # figure is measured once and is the peer for every thread count.
    thread_counts = common.thread_counts(args)
    for n in sizes:
        ns = timestamps(n)
        results.add(f"calendar/N={n}/threads={thread_counts[0]}/impl=pandas",
                    lambda: calendar_features(ns))
        if results.rows and results.rows[-1]["name"].startswith(f"calendar/N={n}/"):
            for threads in thread_counts[1:]:
                row = dict(results.rows[-1])
                row["name"] = f"calendar/N={n}/threads={threads}/impl=pandas"
                results.rows.append(row)
    results.write("calendar")


if __name__ == "__main__":
    main()
