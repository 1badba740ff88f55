"""phasor_client.dask.encode_frame on a dask.distributed LocalCluster (two
worker processes, one thread each) against two real phasor-servers, all on
127.0.0.1.

Every computed result is compared with one EncoderClient.encode_frame of
the whole frame (ddf.compute()), byte for byte: the index, the column
names and dtypes, the feature bytes, and the final SeriesStates. Panels are
random: empty partitions, one-row series, equal times (also across a
partition boundary), NaN values, series in different time zones, the long
layout with channel labels, a frame without a series column, integer ns
times. Layouts: whole series per partition (set_index), and partitions by
time, where series span partitions (one lane and several).

Failures: one server frozen (SIGSTOP) and then SIGKILLed while the tasks
run and calls hang on it (the list names both): the result is still
complete and equal, with the channel's default service config and without
one (then the partitions' calls are repeated whole). Bad input: a NaT, a series whose
rows in a later partition go back in time, a column that varies across
partitions of a frame without a series column: the error is of
encode_frame's class, names the partition, and is encode_frame's error for
that partition (with the states the chain carried into it).
"""

import logging
import os
import shutil
import signal
import tempfile
import time
import unittest

import numpy as np
import pandas as pd

import harness

# The workers are separate processes: they find the built package the way
# this process does.
os.environ["PYTHONPATH"] = os.pathsep.join(
    [harness.PYTHON_DIR] + [p for p in os.environ.get("PYTHONPATH", "")
                            .split(os.pathsep) if p])

import dask  # noqa: E402
import dask.dataframe as dd  # noqa: E402
from distributed import Client, LocalCluster  # noqa: E402

import phasor_client  # noqa: E402
from phasor_client import InvalidInputError  # noqa: E402
from phasor_client import dask as phasor_dask  # noqa: E402
from phasor_client import _dask_tasks  # noqa: E402
from phasor_client.errors import FrameError  # noqa: E402

ZONES = ("America/New_York", "Europe/Berlin", "Asia/Kolkata", "UTC")
START_NS = 1_704_067_200 * 10**9  # 2024-01-01 UTC
SPEC = dict(time={"dim": 8},
            gaps={"include_mask": True, "include_last_value": True},
            calendar={"fields": ["hour_of_day", "day_of_week"]})
# Python-side limits of the test, well inside ctest's TIMEOUT.
COMPUTE_TIMEOUT_S = 120
# How long the killed server is frozen first: calls sent to it meanwhile are
# in flight when it dies (round_robin still sees its connection as ready).
FROZEN_S = 0.5


def random_panel(rng, num_series, max_rows=40, rows=None):
    """A long panel unique_id / ds / temp / load: series of 1 to max_rows
    rows (many of 1) or of `rows` rows, times with repeats (gaps of 0), NaN
    values, rows shuffled across series, an index of distinct
    non-positional labels."""
    frames = []
    for s in range(num_series):
        if rows is None:
            count = int(rng.choice([1, 1, 2, 3,
                                    rng.integers(1, max_rows + 1)]))
        else:
            count = rows
        gaps = rng.choice([0, 0, 1, 60, 3600, 86400], size=count)
        times = (START_NS + int(rng.integers(0, 30 * 86400)) * 10**9
                 + np.cumsum(gaps) * 10**9)
        values = rng.normal(size=(count, 2))
        values[rng.random(size=(count, 2)) < 0.3] = np.nan
        frames.append(pd.DataFrame({
            "unique_id": f"s{s}", "ds": pd.to_datetime(times),
            "temp": values[:, 0], "load": values[:, 1]}))
    df = pd.concat(frames, ignore_index=True)
    df = df.sample(frac=1.0, random_state=int(rng.integers(1 << 31)))
    df.index = pd.Index(np.arange(len(df)) * 7 + 1000, name="row_id")
    return df


def by_time(df, npartitions):
    """Partitions by time: rows sorted by time (stably), cut by count, so
    series span partitions and equal times may straddle a boundary."""
    return dd.from_pandas(df.sort_values("ds", kind="stable"),
                          npartitions=npartitions, sort=False)


def shuffled_within(ddf, seed):
    """Each partition's rows in another order (encode_frame sorts each
    series by time, ties in input order; the reference sees the same)."""
    return ddf.map_partitions(
        lambda part: part.iloc[np.random.default_rng(seed + len(part))
                               .permutation(len(part))])


class _Recorder(logging.Handler):
    """Keeps the messages of the worker's phasor_client.dask logger."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def _start_recording_repeats():
    """(Run on each worker.) A fresh recorder on phasor_client.dask."""
    logger = logging.getLogger("phasor_client.dask")
    for handler in list(logger.handlers):
        if isinstance(handler, _Recorder):
            logger.removeHandler(handler)
    logger.addHandler(_Recorder())


def _recorded_repeats():
    """(Run on each worker.) The recorded messages."""
    return [line for handler in logging.getLogger("phasor_client.dask")
            .handlers if isinstance(handler, _Recorder)
            for line in handler.lines]


class DaskEncodeFrameTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.servers = [harness.Server().start(), harness.Server().start()]
        cls.targets = [server.target for server in cls.servers]
        cls.reference = cls.servers[0].client(deadline_seconds=60)
        cls.workspace = tempfile.mkdtemp(prefix="phasor-dask-test-")
        cls.cluster = LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True,
            host=harness.LOOPBACK, dashboard_address=None,
            local_directory=cls.workspace, silence_logs=40)
        cls.dask_client = Client(cls.cluster)

    @classmethod
    def tearDownClass(cls):
        try:
            cls.dask_client.close()
            cls.cluster.close()
            cls.reference.close()
        finally:
            for server in cls.servers:
                server.__exit__(None, None, None)
            shutil.rmtree(cls.workspace, ignore_errors=True)

    # -- helpers -----------------------------------------------------------

    def compute(self, ddf, target=None, **kwargs):
        """(features, states) of phasor_dask.encode_frame, computed."""
        features, states = phasor_dask.encode_frame(
            ddf, target or self.targets, return_states=True, **kwargs)
        return dask.compute(features, states)

    def assert_equals_whole_frame(self, ddf, target=None, **kwargs):
        """The Dask result equals encode_frame of ddf.compute(), bytewise."""
        frame_kwargs = {k: v for k, v in kwargs.items()
                        if k not in ("partitioned_by", "lanes",
                                     "client_options")}
        whole = self.reference.encode_frame(ddf.compute(), **frame_kwargs)
        features, states = self.compute(ddf, target, **kwargs)
        expected = whole.frame
        self.assertTrue(features.index.equals(expected.index))
        self.assertEqual(features.index.dtype, expected.index.dtype)
        self.assertEqual(list(features.columns), list(expected.columns))
        self.assertEqual(list(features.dtypes), list(expected.dtypes))
        self.assertEqual(features.to_numpy().tobytes(),
                         expected.to_numpy().tobytes())
        self.assertEqual(states.to_dict(), whole.states)
        return features

    # -- equal to one call -------------------------------------------------

    def test_series_partitions(self):
        rng = np.random.default_rng(1)
        df = random_panel(rng, 60)
        ddf = dd.from_pandas(df.reset_index().set_index("unique_id"),
                             npartitions=5)
        self.assertTrue(ddf.known_divisions)
        for partitioned_by in (None, "series"):
            with self.subTest(partitioned_by=partitioned_by):
                self.assert_equals_whole_frame(
                    ddf, series_column="unique_id", time_column="ds",
                    value_columns=["temp", "load"],
                    partitioned_by=partitioned_by, **SPEC)

    def test_time_partitions(self):
        rng = np.random.default_rng(2)
        df = random_panel(rng, 80)
        ddf = by_time(df, 7)
        for lanes in (1, 3):
            with self.subTest(lanes=lanes):
                self.assert_equals_whole_frame(ddf, lanes=lanes, **SPEC)
        with self.subTest("rows shuffled within partitions"):
            self.assert_equals_whole_frame(shuffled_within(ddf, 5), lanes=2,
                                           **SPEC)
        with self.subTest("series sorted, cut anywhere"):
            cut = dd.from_pandas(
                df.sort_values(["unique_id", "ds"], kind="stable"),
                npartitions=6, sort=False)
            self.assert_equals_whole_frame(cut, **SPEC)

    def test_empty_partitions_and_frames(self):
        rng = np.random.default_rng(3)
        df = random_panel(rng, 30)
        ddf = by_time(df, 6)
        # The later partitions lose every row, one keeps a single row.
        cutoff = df["ds"].sort_values().iloc[len(df) // 3]
        sparse = ddf[ddf["ds"] <= cutoff]
        self.assertIn(0, sparse.map_partitions(len).compute().tolist())
        self.assert_equals_whole_frame(sparse, lanes=2, **SPEC)
        empty = ddf[ddf["ds"] < pd.Timestamp(0)]
        features = self.assert_equals_whole_frame(empty, **SPEC)
        self.assertEqual(len(features), 0)

    def test_time_zones_per_series(self):
        rng = np.random.default_rng(4)
        df = random_panel(rng, 40)
        zones = {f"s{s}": ZONES[s % len(ZONES)] for s in range(40)}
        self.assert_equals_whole_frame(by_time(df, 5), time_zones=zones,
                                       lanes=2, **SPEC)
        # A tz-aware time column: its zone is the calendar's.
        aware = df.assign(ds=df["ds"].dt.tz_localize("UTC")
                          .dt.tz_convert("Asia/Tokyo"))
        self.assert_equals_whole_frame(by_time(aware, 4), **SPEC)

    def test_long_layout_channels_from_the_whole_frame(self):
        rng = np.random.default_rng(5)
        df = random_panel(rng, 30)
        long = df.melt(id_vars=["unique_id", "ds"],
                       value_vars=["temp", "load"], var_name="channel",
                       value_name="value", ignore_index=False)
        long = long.dropna(subset=["value"])
        # "load" only in the later half of time: the first partitions hold
        # only "temp" events, so the channels (and the columns) must come
        # from the whole frame.
        middle = long["ds"].sort_values().iloc[len(long) // 2]
        long = long[(long["channel"] == "temp") | (long["ds"] >= middle)]
        long.index = pd.RangeIndex(len(long)) * 3 + 5
        ddf = dd.from_pandas(long.sort_values("ds", kind="stable"),
                             npartitions=6, sort=False)
        self.assertNotIn("load", ddf.partitions[0].compute()["channel"].values)
        self.assert_equals_whole_frame(
            ddf, series_column="unique_id", time_column="ds",
            channel_column="channel", lanes=2,
            gaps={"include_mask": True}, time={"dim": 4})

    def test_one_series_without_series_column_and_integer_times(self):
        rng = np.random.default_rng(6)
        df = random_panel(rng, 1, rows=150)
        one = df.drop(columns="unique_id")
        self.assert_equals_whole_frame(by_time(one, 5), time_column="ds",
                                       **SPEC)
        ints = df.assign(ds=df["ds"].astype("int64"))
        self.assert_equals_whole_frame(by_time(ints, 4), **SPEC)

    def test_integer_times_near_the_epoch_are_refused_for_the_frame(self):
        # Seconds without time_unit: refused with encode_frame's own error,
        # when the frame is built (one pass over the time column).
        df = pd.DataFrame({"unique_id": ["a"] * 4,
                           "ds": np.arange(4) * 3600 + 1_704_067_200,
                           "y": np.arange(4.0)})
        with self.assertRaises(InvalidInputError) as expected:
            self.reference.encode_frame(df, time={"dim": 4})
        with self.assertRaises(InvalidInputError) as got:
            phasor_dask.encode_frame(dd.from_pandas(df, npartitions=2),
                                     self.targets, time={"dim": 4})
        self.assertEqual(got.exception.field_violations(),
                         expected.exception.field_violations())
        # One partition near the epoch, the frame not: read as ns, as the
        # whole frame is.
        mixed = pd.DataFrame({"unique_id": ["a", "a", "b", "b"],
                              "ds": [5, 9, START_NS, START_NS + 10**9],
                              "y": np.arange(4.0)})
        self.assert_equals_whole_frame(
            dd.from_pandas(mixed, npartitions=2, sort=False),
            time={"dim": 4})

    def test_states_continue_the_next_frame(self):
        rng = np.random.default_rng(11)
        df = random_panel(rng, 40).sort_values("ds", kind="stable")
        first, second = df.iloc[:len(df) // 2], df.iloc[len(df) // 2:]
        whole_first = self.reference.encode_frame(first, **SPEC)
        whole_second = self.reference.encode_frame(
            second, states=whole_first.states, **SPEC)
        _, states = self.compute(by_time(first, 3), lanes=2, **SPEC)
        self.assertEqual(states.to_dict(), whole_first.states)
        # The computed states Series is taken as states= as it comes.
        features, later = self.compute(by_time(second, 3), lanes=2,
                                       states=states, **SPEC)
        self.assertEqual(features.to_numpy().tobytes(),
                         whole_second.frame.to_numpy().tobytes())
        self.assertEqual(later.to_dict(), whole_second.states)

    # -- servers and channels ----------------------------------------------

    def test_one_channel_per_worker_process(self):
        rng = np.random.default_rng(7)
        ddf = by_time(random_panel(rng, 40), 12)
        options = {"deadline_seconds": 45.0}
        self.assert_equals_whole_frame(ddf, lanes=2, client_options=options,
                                       **SPEC)
        key = (tuple(self.targets), (("deadline_seconds", 45.0),))
        counts = self.dask_client.run(
            lambda: sum(1 for k in _dask_tasks._clients if k == key))
        # Each worker that ran a task made one client for the target.
        self.assertLessEqual(max(counts.values()), 1, counts)
        self.assertGreaterEqual(sum(counts.values()), 1, counts)

    def test_a_server_killed_mid_run(self):
        # With the channel's default service config, gRPC retries most
        # failed calls on the other server itself; without one, every call
        # the dead server held fails and the partition's call is repeated
        # whole (logged by each worker's phasor_client.dask logger).
        for service_config, repeats in ((phasor_client.DEFAULT_SERVICE_CONFIG,
                                         None), (None, True)):
            with self.subTest(service_config=service_config is not None):
                self.dask_client.run(_start_recording_repeats)
                self.run_with_a_server_killed(
                    {"service_config": service_config})
                logged = sum(self.dask_client.run(_recorded_repeats)
                             .values(), [])
                if repeats:
                    self.assertTrue(logged, "no partition call repeated")
                    self.assertTrue(all("UNAVAILABLE" in line or
                                        "CANCELLED" in line
                                        for line in logged), logged)

    def run_with_a_server_killed(self, client_options):
        servers = [harness.Server().start(), harness.Server().start()]
        try:
            rng = np.random.default_rng(8)
            df = random_panel(rng, 400, max_rows=120)
            ddf = by_time(df, 40)
            whole = self.reference.encode_frame(ddf.compute(), **SPEC)
            features, states = phasor_dask.encode_frame(
                ddf, [s.target for s in servers], return_states=True,
                lanes=2, client_options=client_options, **SPEC)
            victim = servers[0]
            handled_before = self.handled(victim)
            futures = self.dask_client.compute([features, states])
            # Once it has answered calls of this run, freeze it (SIGSTOP)
            # long enough for round_robin to send it calls that then hang,
            # and kill it (SIGKILL: no draining, those calls fail).
            deadline = time.monotonic() + COMPUTE_TIMEOUT_S
            while self.handled(victim) < handled_before + 3:
                self.assertLess(time.monotonic(), deadline)
                self.assertFalse(all(f.done() for f in futures),
                                 "finished before the kill")
                time.sleep(0.01)
            victim.send_signal(signal.SIGSTOP)
            time.sleep(FROZEN_S)
            victim.kill()
            killed_while_running = not all(f.done() for f in futures)
            got, got_states = self.dask_client.gather(futures)
            self.assertTrue(killed_while_running)
            self.assertTrue(got.index.equals(whole.frame.index))
            self.assertEqual(got.to_numpy().tobytes(),
                             whole.frame.to_numpy().tobytes())
            self.assertEqual(got_states.to_dict(), whole.states)
        finally:
            for server in servers:
                server.__exit__(None, None, None)

    @staticmethod
    def handled(server):
        samples = harness.parse_metrics(server.metrics())
        return int(harness.metric_value(
            samples, "grpc_server_handled_total",
            grpc_method="EncodeObservations") or 0)

    # -- errors ------------------------------------------------------------

    def test_nat_names_the_partition_and_row(self):
        rng = np.random.default_rng(9)
        df = random_panel(rng, 30).sort_values("ds", kind="stable")
        bad_label = df.index[len(df) // 2]
        df.loc[bad_label, "ds"] = pd.NaT
        ddf = dd.from_pandas(df, npartitions=4, sort=False)
        lengths = ddf.map_partitions(len).compute().tolist()
        partition = int(np.searchsorted(np.cumsum(lengths), len(df) // 2,
                                        side="right"))
        part = ddf.partitions[partition].compute()
        with self.assertRaises(InvalidInputError) as whole:
            self.reference.encode_frame(ddf.compute(), **SPEC)
        with self.assertRaises(InvalidInputError) as alone:
            self.reference.encode_frame(part, **SPEC)
        for lanes in (1, 2):
            with self.subTest(lanes=lanes), \
                    self.assertRaises(InvalidInputError) as got:
                self.compute(ddf, lanes=lanes, **SPEC)
            error = got.exception
            self.assertIsInstance(error, phasor_dask.PartitionInputError)
            self.assertEqual(error.partition, partition)
            self.assertEqual(error.code(), whole.exception.code())
            (field, description), = error.field_violations()
            (alone_field, alone_description), = \
                alone.exception.field_violations()
            self.assertEqual(field, f"partitions[{partition}].{alone_field}")
            self.assertEqual(description, alone_description)
            row = int(np.flatnonzero(part.index == bad_label)[0])
            self.assertEqual(field, f"partitions[{partition}].df['ds'][{row}]")
            # The same row as the whole frame's error: its index label.
            self.assertIn(f"(index label {bad_label!r})", description)
            self.assertIn(f"(index label {bad_label!r})",
                          whole.exception.details())

    def test_a_series_going_back_in_time_across_partitions(self):
        rng = np.random.default_rng(10)
        df = random_panel(rng, 30).sort_values("ds", kind="stable")
        ddf = dd.from_pandas(df, npartitions=4, sort=False)
        parts = [ddf.partitions[p].compute() for p in range(4)]
        # A row of a series seen in partition 1, put in partition 2 an hour
        # before that series' last time in partition 1.
        series = parts[1]["unique_id"].iloc[-1]
        last = parts[1].loc[parts[1]["unique_id"] == series, "ds"].max()
        label = int(df.index.max()) + 7
        back = pd.DataFrame({"unique_id": [series],
                             "ds": [last - pd.Timedelta(hours=1)],
                             "temp": [1.0], "load": [np.nan]},
                            index=pd.Index([label], name="row_id"))
        parts[2] = pd.concat([parts[2], back])
        bad = dd.from_delayed([dask.delayed(p) for p in parts], meta=df[:0])
        # The whole frame sorts it in; the chain cannot.
        self.reference.encode_frame(bad.compute(), **SPEC)
        carried = self.reference.encode_frame(pd.concat(parts[:2]), **SPEC)
        with self.assertRaises(FrameError) as alone:
            self.reference.encode_frame(parts[2], states=carried.states,
                                        **SPEC)
        for lanes in (1, 3):
            with self.subTest(lanes=lanes), \
                    self.assertRaises(FrameError) as got:
                self.compute(bad, lanes=lanes, **SPEC)
            error = got.exception
            self.assertIsInstance(error, phasor_dask.PartitionFrameError)
            self.assertEqual(error.partition, 2)
            self.assertEqual(
                (error.series_id, error.index_label, error.row, error.column),
                (series, label, len(parts[2]) - 1, "ds"))
            (field, description), = error.field_violations()
            (alone_field, alone_description), = \
                alone.exception.field_violations()
            self.assertEqual(field, f"partitions[2].{alone_field}")
            self.assertEqual(description, alone_description)
            self.assertIn("decreasing", description)

    def test_a_column_varying_across_partitions_without_series_column(self):
        df = pd.DataFrame({
            "station": ["a"] * 3 + ["b"] * 3,
            "ds": pd.to_datetime(START_NS + np.arange(6) * 10**9),
            "y": np.arange(6.0)})
        with self.assertRaises(InvalidInputError) as whole:
            self.reference.encode_frame(df, time={"dim": 4})
        ddf = dd.from_pandas(df, npartitions=2, sort=False)
        with self.assertRaises(InvalidInputError) as got:
            self.compute(ddf, time={"dim": 4})
        (field, _), = got.exception.field_violations()
        (whole_field, _), = whole.exception.field_violations()
        self.assertEqual(field, f"partitions[1].{whole_field}")
        self.assertIn("'station'", got.exception.details())

    def test_frame_errors_are_raised_when_built(self):
        ddf = dd.from_pandas(pd.DataFrame({"a": [1.0]}), npartitions=1)
        with self.assertRaises(InvalidInputError) as expected:
            self.reference.encode_frame(ddf.compute(), time={"dim": 4})
        with self.assertRaises(InvalidInputError) as got:
            phasor_dask.encode_frame(ddf, self.targets, time={"dim": 4})
        self.assertEqual(type(got.exception), type(expected.exception))
        self.assertEqual(got.exception.field_violations(),
                         expected.exception.field_violations())
        with self.assertRaises(InvalidInputError):
            phasor_dask.encode_frame(ddf, [], time={"dim": 4})


if __name__ == "__main__":
    unittest.main()
