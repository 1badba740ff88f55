"""The Python client's pandas/numpy surface against a real phasor-server:
timestamps it cannot read without doubt are errors (float seconds above all),
DatetimeIndex and tz-aware times in, NaT named by row, dict specs equal to
proto specs, timestamps-only and long-layout calls, one name per feature
column, and encode_frame: a panel DataFrame (Nixtla, GluonTS, wide) in, a
named DataFrame out, equal to the same features computed with pandas here."""

import datetime
import math
import unittest

import grpc
import numpy as np
import pandas as pd
from google.protobuf import text_format

import harness
from phasor_client import times as times_module
from phasor_client import (InvalidInputError, PhasorError, encoder_spec,
                           feature_names, field_violations, pb,
                           temporal_spec)
from phasor_client.errors import FrameError

# float32 outputs of angles formed two ways (Phasor: exact integer phase;
# pandas: float64 seconds) agree to a few float32 ulps
# (bench/peers/panel_peer.py).
TOLERANCE = 2e-5
ZONE = "America/New_York"
TIME_DIM = 8
# core/continuous_time.h's default ladder: 1 s to 10 Gregorian years.
MIN_PERIOD_SECONDS = 1.0
MAX_PERIOD_SECONDS = 315569520.0
# The example: 2024-03-30 22:00, 23:00 and 2024-03-31 01:00 in
# Berlin, across the spring-forward (02:00 does not exist that night).
BERLIN = pd.DatetimeIndex(["2024-03-30 22:00", "2024-03-30 23:00",
                           "2024-03-31 01:00"]).tz_localize("Europe/Berlin")
HOURS_SPEC = {"calendar": {"fields": ["hour_of_day"], "encoding": "index"},
              "gaps": {"per_channel_delta": False}}
FRAME_SPEC = dict(time={"dim": TIME_DIM},
                  gaps={"include_mask": True, "include_last_value": True},
                  calendar={"fields": ["hour_of_day", "day_of_week"]})


def ladder(dim):
    count = dim // 2
    return [MIN_PERIOD_SECONDS * (MAX_PERIOD_SECONDS / MIN_PERIOD_SECONDS)
            ** (k / (count - 1)) for k in range(count)]


def pandas_features(frame, series, time, channels, zone):
    """FRAME_SPEC's features, the pandas way, named as feature_names does,
    aligned with frame's index. frame: any row order; time UTC-aware."""
    ordered = frame.assign(_series=frame[series] if series else 0,
                           _time=frame[time])
    ordered = ordered.sort_values(["_series", "_time"], kind="stable")
    groups = ordered.groupby("_series", sort=False)
    seconds = ordered["_time"].astype("int64") / 1e9
    tau = seconds - groups["_time"].transform("first").astype("int64") / 1e9
    out = {}
    for k, period in enumerate(ladder(TIME_DIM)):
        angle = (2 * math.pi / period) * tau
        out[f"time.sin_{k}"] = np.sin(angle)
        out[f"time.cos_{k}"] = np.cos(angle)
    out["gaps.global_delta"] = (groups["_time"].diff().dt.total_seconds()
                                .fillna(0.0))
    observed = {c: ordered[c].notna() for c in channels}
    for c in channels:
        seen = ordered["_time"].where(observed[c])
        last_seen = seen.groupby(ordered["_series"], sort=False).shift(1)
        last_seen = last_seen.groupby(ordered["_series"], sort=False).ffill()
        out[f"gaps.delta.{c}"] = ((ordered["_time"] - last_seen)
                                  .dt.total_seconds().fillna(0.0))
    for c in channels:
        out[f"gaps.mask.{c}"] = observed[c].astype(np.float64)
    for c in channels:
        out[f"gaps.last_value.{c}"] = (
            ordered[c].groupby(ordered["_series"], sort=False).ffill()
            .fillna(0.0))
    local = ordered["_time"].dt.tz_convert(zone)
    for name, x, period in (("hour_of_day", local.dt.hour, 24),
                            ("day_of_week", local.dt.dayofweek, 7)):
        angle = (2 * math.pi / period) * x
        out[f"calendar.{name}.sin"] = np.sin(angle)
        out[f"calendar.{name}.cos"] = np.cos(angle)
    return pd.DataFrame(out, index=ordered.index).loc[frame.index]


def assert_close_to_pandas(got, expected):
    """Same names and values: angles to TOLERANCE, gaps (seconds, up to
    days) to float32 rounding."""
    assert list(got.columns) == list(expected.columns), (
        list(got.columns), list(expected.columns))
    np.testing.assert_allclose(got.to_numpy(np.float64),
                               expected.to_numpy(np.float32)
                               .astype(np.float64),
                               rtol=1e-6, atol=TOLERANCE)


def random_long_frame(rng, num_series, ids):
    """A Nixtla-style long frame (unique_id, ds, y), rows shuffled, distinct
    times per series, NaN values, series across New York's DST change."""
    parts = []
    for s in range(num_series):
        length = int(rng.integers(1, 40))
        start = pd.Timestamp("2024-03-09 12:00", tz="UTC") + pd.Timedelta(
            minutes=int(rng.integers(0, 600)))
        steps = rng.integers(1, 240, size=length).cumsum()
        ds = start + pd.to_timedelta(steps, unit="min") + pd.to_timedelta(
            rng.integers(0, 60_000, size=length), unit="ms")
        y = rng.standard_normal(length)
        y[rng.random(length) < 0.3] = np.nan
        parts.append(pd.DataFrame({"unique_id": ids[s], "ds": ds, "y": y}))
    frame = pd.concat(parts, ignore_index=True)
    frame = frame.sample(frac=1.0, random_state=5)
    frame.index = [f"r{i}" for i in frame.index]  # Labels, not positions.
    return frame


class Counting:
    """Wraps a stub's EncodeObservations to count the requests sent."""

    def __init__(self, method):
        self.method = method
        self.requests = 0

    def __call__(self, request, **kwargs):
        self.requests += 1
        return self.method(request, **kwargs)

    def future(self, request, **kwargs):
        self.requests += 1
        return self.method.future(request, **kwargs)


class FramePythonTest(harness.ServerTestCase):

    CLIENT_DEADLINE_SECONDS = 60

    # -- timestamps -------------------------------------------------------

    def assert_invalid(self, call, field, *words):
        with self.assertRaises(InvalidInputError) as raised:
            call()
        error = raised.exception
        self.assertIsInstance(error, PhasorError)
        self.assertIsInstance(error, grpc.RpcError)
        self.assertEqual(error.code(), grpc.StatusCode.INVALID_ARGUMENT)
        if field is not None:
            self.assertEqual(error.field_violations()[0][0], field)
        self.assertEqual(field_violations(error), error.field_violations())
        for word in words:
            self.assertIn(word, error.details())
        return error

    def test_float_seconds_are_an_error_in_every_method(self):
        seconds = BERLIN.asi8 / 1e9
        values = np.ones((3, 1))
        calls = {
            "encode_observations": lambda: self.client.encode_observations(
                seconds, values, spec=HOURS_SPEC),
            "encode_observations_stream": lambda: list(
                self.client.encode_observations_stream(
                    [(seconds, values)], spec=HOURS_SPEC)),
            "encode_panel": lambda: self.client.encode_panel(
                seconds, values, series_offsets=[0, 3], spec=HOURS_SPEC),
            "encode_events": lambda: self.client.encode_events(
                seconds, [0, 0, 0], [1.0, 2.0, 3.0], spec=HOURS_SPEC),
            "encode_panel long": lambda: self.client.encode_panel(
                event_times=seconds, event_channels=[0, 0, 0],
                series_offsets=[0, 3], spec=HOURS_SPEC),
        }
        for name, call in calls.items():
            with self.subTest(name):
                field = ("event_times" if "event" in name or "long" in name
                         else "chunks[0].timestamps" if "stream" in name
                         else "timestamps")
                self.assert_invalid(call, field, "time_unit='s'",
                                    "float64")
        # float32 cannot hold a timestamp at all.
        self.assert_invalid(lambda: self.client.encode_observations(
            seconds.astype(np.float32), values, spec=HOURS_SPEC),
            "timestamps", "float32")
        # Strings and booleans are not times either.
        self.assert_invalid(lambda: self.client.encode_observations(
            np.array(["2024-01-01"]), spec=HOURS_SPEC), "timestamps")

    def test_time_unit_reads_numbers(self):
        zone = dict(HOURS_SPEC, calendar=dict(HOURS_SPEC["calendar"],
                                             time_zone="Europe/Berlin"))
        expected = self.client.encode_observations(BERLIN.asi8, spec=zone)
        np.testing.assert_array_equal(expected.features[:, 1], [22, 23, 1])
        np.testing.assert_array_equal(expected.features[:, 0],
                                      [0, 3600, 7200])
        for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3),
                            ("ns", 1.0)):
            for cast in (lambda a: a / scale,
                         lambda a: (a // int(scale)).astype(np.int64)):
                got = self.client.encode_observations(
                    cast(BERLIN.asi8), spec=zone, time_unit=unit)
                self.assertEqual(got.features.tobytes(),
                                 expected.features.tobytes(), unit)
        panel = self.client.encode_panel(BERLIN.asi8 / 1e9, time_unit="s",
                                         series_offsets=[0, 3], spec=zone)
        self.assertEqual(panel.features.tobytes(),
                         expected.features.tobytes())
        self.assert_invalid(lambda: self.client.encode_observations(
            BERLIN.asi8, spec=zone, time_unit="hours"), "time_unit")

    def test_datetime_index_and_tz_aware_zone(self):
        # Tz-aware: the data's zone is the calendar zone (the issue's
        # hours), unless the spec names one.
        aware = self.client.encode_observations(BERLIN, spec=HOURS_SPEC)
        np.testing.assert_array_equal(aware.features[:, 1], [22, 23, 1])
        self.assertIn("hour_of_day", aware.schema[1].block)
        utc = self.client.encode_observations(
            BERLIN, spec={"calendar": {"fields": ["hour_of_day"],
                                       "encoding": "INDEX",
                                       "time_zone": "UTC"}})
        np.testing.assert_array_equal(utc.features[:, 0], BERLIN.tz_convert(
            "UTC").hour)
        # A Series of datetimes, naive (UTC) or aware; datetime64[s].
        naive = BERLIN.tz_convert("UTC").tz_localize(None)
        for times in (pd.Series(naive), naive.values.astype("datetime64[s]"),
                      list(naive.to_pydatetime())):
            got = self.client.encode_observations(times, spec=HOURS_SPEC)
            np.testing.assert_array_equal(got.features[:, 1],
                                          naive.hour)
        series = self.client.encode_observations(pd.Series(BERLIN),
                                                 spec=HOURS_SPEC)
        self.assertEqual(series.features.tobytes(), aware.features.tobytes())
        # encode_panel and the stream take it too.
        panel = self.client.encode_panel(BERLIN, series_offsets=[0, 3],
                                         spec=HOURS_SPEC)
        self.assertEqual(panel.features.tobytes(), aware.features.tobytes())
        streamed = list(self.client.encode_observations_stream(
            [BERLIN[:2], (BERLIN[2:], None)], spec=HOURS_SPEC))
        self.assertEqual(np.concatenate([s.features for s in streamed])
                         .tobytes(), aware.features.tobytes())

    def test_fixed_offset_zones(self):
        # A whole-hour fixed offset is the IANA Etc/GMT zone of opposite
        # (POSIX) sign; a half-hour one has no IANA name and is an error.
        plus5 = datetime.timezone(datetime.timedelta(hours=5))
        times = pd.date_range("2024-06-01 00:00", periods=3, freq="7h",
                              tz=plus5)
        got = self.client.encode_observations(times, spec=HOURS_SPEC)
        np.testing.assert_array_equal(got.features[:, 1], [0, 7, 14])
        self.assertEqual(times_module.zone_name(plus5), "Etc/GMT-5")
        half = times.tz_convert(datetime.timezone(
            datetime.timedelta(hours=5, minutes=30)))
        self.assert_invalid(lambda: self.client.encode_observations(
            half, spec=HOURS_SPEC), "timestamps", "IANA")

    def test_frame_time_unit(self):
        frame = pd.DataFrame({"t": BERLIN.asi8 / 1e9, "v": [1.0, 2.0, 3.0]})
        self.assert_invalid(lambda: self.client.encode_frame(
            frame, time_column="t", spec=HOURS_SPEC), "df['t']", "time_unit")
        got = self.client.encode_frame(frame, time_column="t", time_unit="s",
                                       spec=HOURS_SPEC)
        expected = self.client.encode_frame(
            frame.assign(t=BERLIN), time_column="t",
            spec={"calendar": dict(HOURS_SPEC["calendar"], time_zone="UTC"),
                  "gaps": HOURS_SPEC["gaps"]})
        self.assertEqual(got.frame.to_numpy().tobytes(),
                         expected.frame.to_numpy().tobytes())
        self.assertEqual(list(got.frame.columns),
                         ["gaps.global_delta", "calendar.hour_of_day"])

    def test_nat_names_the_row(self):
        times = pd.Series(pd.to_datetime(["2024-01-01", "2024-01-02", None]),
                          index=["a", "b", "c"])
        error = self.assert_invalid(
            lambda: self.client.encode_observations(times, spec=HOURS_SPEC),
            "timestamps[2]", "NaT", "row 2", "'c'")
        self.assertIn("index label", error.details())
        self.assert_invalid(lambda: self.client.encode_panel(
            times.values, series_offsets=[0, 3], spec=HOURS_SPEC),
            "timestamps[2]", "row 2")
        frame = pd.DataFrame({"unique_id": ["x", "x", "y"],
                              "ds": times.values, "y": [1.0, 2.0, 3.0]},
                             index=["a", "b", "c"])
        self.assert_invalid(lambda: self.client.encode_frame(
            frame, spec=HOURS_SPEC), "df['ds'][2]", "row 2", "'c'")

    # -- specs ------------------------------------------------------------

    def test_dict_specs_equal_proto_specs(self):
        text = """temporal {
          content {}
          time { dim: 4 min_period_seconds: 60 origin: UNIX_EPOCH }
          gaps { first_observation: FLAG transform: LOG1P
                 include_mask: true }
          calendar { time_zone: "Europe/Berlin"
                     fields: [HOUR_OF_DAY, DAY_OF_WEEK] encoding: LINEAR
                     holidays { dates: ["2024-03-31"] kernel: EXPONENTIAL } }
        }"""
        proto = text_format.Parse(text, pb.EncoderSpec())
        as_dict = {"content": True,
                   "time": {"dim": 4, "min_period_seconds": 60,
                            "origin": "unix_epoch"},
                   "gaps": {"first_observation": "flag",
                            "transform": "Log1p", "include_mask": True},
                   "calendar": {"time_zone": "Europe/Berlin",
                                "fields": ["hour_of_day", "DAY_OF_WEEK"],
                                "encoding": "linear",
                                "holidays": {"dates": ["2024-03-31"],
                                             "kernel": "exponential"}}}
        self.assertEqual(encoder_spec(as_dict), proto)
        self.assertEqual(encoder_spec({"temporal": as_dict}), proto)
        self.assertEqual(encoder_spec(text), proto)
        self.assertEqual(encoder_spec(proto.temporal), proto)
        self.assertEqual(temporal_spec(**as_dict), proto.temporal)
        # A keyword block replaces the spec's block.
        self.assertEqual(temporal_spec(text, time={"dim": 6}).time,
                         pb.TimeBlock(dim=6))

        times = BERLIN.tz_convert("UTC").tz_localize(None)
        values = np.array([[1.0, np.nan], [np.nan, 2.0], [3.0, 4.0]])
        expected = self.client.encode_observations(times, values, spec=proto)
        for spec_kwargs in ({"spec": as_dict}, {"spec": proto.temporal},
                            {"spec": text},
                            {"content_block": True, "time": as_dict["time"],
                             "gaps": as_dict["gaps"],
                             "calendar": as_dict["calendar"]}):
            got = self.client.encode_observations(times, values,
                                                  **spec_kwargs)
            self.assertEqual(got.features.tobytes(),
                             expected.features.tobytes(), spec_kwargs)
        # Positional and RoPE specs as dicts too.
        sinusoid = self.client.encode_positions(
            count=5, spec={"positional": {"sinusoidal": {
                "dim": 8, "layout": "split_sin_cos"}}})
        np.testing.assert_array_equal(sinusoid, self.client.encode_positions(
            count=5, dim=8, layout="SPLIT_SIN_COS"))
        tables = self.client.rope_tables(count=5, spec={
            "rotary_dim": 8, "layout": "half",
            "scaling": {"yarn": {"factor": 2.0,
                                 "original_max_position_embeddings": 16}}})
        proto_tables = self.client.rope_tables(count=5, spec=(
            "rope { rotary_dim: 8 layout: HALF scaling { yarn { factor: 2 "
            "original_max_position_embeddings: 16 } } }"))
        np.testing.assert_array_equal(tables.cos, proto_tables.cos)
        # Mistakes name the path and list what is allowed.
        self.assert_invalid(lambda: encoder_spec(
            {"calendar": {"fields": ["hour"]}}),
            "spec.temporal.calendar.fields[0]", "hour_of_day")
        self.assert_invalid(lambda: encoder_spec({"time": {"dims": 4}}),
                            "spec.temporal.time.dims", "dim")
        self.assert_invalid(lambda: self.client.encode_observations(
            times, profile="x", time={"dim": 4}), "profile")

    # -- timestamps only, the long layout, names --------------------------

    def test_timestamps_only(self):
        times = pd.date_range("2024-01-01", periods=4, freq="90min")
        got = self.client.encode_observations(
            times, time={"dim": 2, "min_period_seconds": 86400},
            gaps={"per_channel_delta": False})
        self.assertEqual(feature_names(got.schema),
                         ["time.sin_0", "time.cos_0", "gaps.global_delta"])
        np.testing.assert_array_equal(got.features[:, 2], [0, 5400, 5400,
                                                           5400])
        np.testing.assert_allclose(
            got.features[:, 0],
            np.sin(2 * np.pi * np.arange(4) * 5400 / 86400), atol=2e-6)

    def test_encode_events(self):
        start = 1_700_000_000 * 10**9
        times = start + np.array([0, 10, 10, 25, 40]) * 10**9
        channels = ["hr", "bp", "hr", "bp", "hr"]
        values = [60.0, 120.0, 61.0, np.nan, 62.0]
        got = self.client.encode_events(
            times, channels, values, channel_names=["hr", "bp", "spo2"],
            gaps={"include_mask": True, "include_last_value": True})
        names = feature_names(got.schema, ["hr", "bp", "spo2"])
        frame = pd.DataFrame(got.features, columns=names)
        self.assertEqual(len(frame), 5)  # One row per event.
        # δ: time since the channel's last observation strictly before t.
        np.testing.assert_array_equal(frame["gaps.delta.hr"],
                                      [0, 10, 10, 15, 30])
        # bp was seen at t=10, not strictly before the hr event at t=10.
        np.testing.assert_array_equal(frame["gaps.delta.bp"],
                                      [0, 0, 0, 15, 30])
        np.testing.assert_array_equal(frame["gaps.mask.hr"],
                                      [1, 0, 1, 0, 1])
        np.testing.assert_array_equal(frame["gaps.mask.bp"],
                                      [0, 1, 0, 0, 0])  # NaN observes nothing.
        np.testing.assert_array_equal(frame["gaps.last_value.hr"],
                                      [60, 60, 61, 61, 62])
        np.testing.assert_array_equal(frame["gaps.mask.spo2"], 0)
        # Numbers work as channels; the state continues the series.
        numbered = self.client.encode_events(
            times[:3], [0, 1, 0], values[:3], num_channels=3,
            gaps={"include_mask": True, "include_last_value": True})
        rest = self.client.encode_events(
            times[3:], [1, 0], values[3:], state=numbered.state,
            num_channels=3,
            gaps={"include_mask": True, "include_last_value": True})
        self.assertEqual(np.concatenate([numbered.features, rest.features])
                         .tobytes(), got.features.tobytes())
        self.assert_invalid(lambda: self.client.encode_events(
            times, channels, values, channel_names=["hr"], time={}),
            "event_channels[1]", "bp")

    def test_feature_names_follow_the_layout(self):
        spec = {"content": {},
                "time": {"dim": 4},
                "time2vec": {"omega": [1.0, 2.0, 3.0], "phi": [0, 0, 0]},
                "gaps": {"first_observation": "flag",
                         "transform": "sinusoidal", "sinusoidal_dim": 4,
                         "include_mask": True, "include_last_value": True},
                "calendar": {"fields": ["hour_of_day", "month_of_year"],
                             "include_utc_offset": True,
                             "include_dst": True,
                             "holidays": {"dates": ["2024-12-25"]}}}
        times = pd.date_range("2024-01-01", periods=3, freq="h")
        got = self.client.encode_observations(
            times, np.ones((3, 2)), spec=spec, channel_names=["a", "b"])
        expected = (
            ["content.values.a", "content.values.b", "content.mask.a",
             "content.mask.b",
             "time.sin_0", "time.cos_0", "time.sin_1", "time.cos_1",
             "time2vec.linear", "time2vec.sin_1", "time2vec.sin_2"]
            + [f"gaps.global_delta.{p}_{k}" for k in range(2)
               for p in ("sin", "cos")]
            + ["gaps.global_first_flag"]
            + [f"gaps.delta.{c}.{p}_{k}" for c in "ab" for k in range(2)
               for p in ("sin", "cos")]
            + ["gaps.first_flag.a", "gaps.first_flag.b", "gaps.mask.a",
               "gaps.mask.b", "gaps.last_value.a", "gaps.last_value.b",
               "calendar.hour_of_day.sin", "calendar.hour_of_day.cos",
               "calendar.month_of_year.sin", "calendar.month_of_year.cos",
               "calendar.utc_offset", "calendar.dst", "calendar.holidays"])
        self.assertEqual(feature_names(got.schema, ["a", "b"]), expected)
        self.assertEqual(len(expected), got.features.shape[1])
        # Without names, channels are numbered; RAW gaps are one column.
        plain = self.client.encode_observations(
            times, np.ones((3, 2)), gaps={"first_observation": "flag"},
            calendar={"fields": ["quarter"], "encoding": "index"})
        self.assertEqual(feature_names(plain.schema), [
            "gaps.global_delta", "gaps.global_first_flag", "gaps.delta.0",
            "gaps.delta.1", "gaps.first_flag.0", "gaps.first_flag.1",
            "calendar.quarter"])
        # combine SUM: every block adds into the same d_model columns.
        summed = self.client.encode_observations(
            times, time={}, calendar={"fields": ["hour_of_day"]},
            combine="sum", d_model=6)
        self.assertEqual(feature_names(summed.schema),
                         [f"sum.{i}" for i in range(6)])

    # -- encode_frame -----------------------------------------------------

    def test_frame_nixtla_equals_pandas(self):
        rng = np.random.default_rng(17)
        frame = random_long_frame(rng, 12, [f"id{s}" for s in range(12)])
        result = self.client.encode_frame(frame, calendar=dict(
            FRAME_SPEC["calendar"], time_zone=ZONE), time=FRAME_SPEC["time"],
            gaps=FRAME_SPEC["gaps"])
        expected = pandas_features(frame, "unique_id", "ds", ["y"], ZONE)
        self.assertEqual(list(result.frame.columns), list(expected.columns))
        self.assertTrue(result.frame.index.equals(frame.index))
        self.assertEqual(result.frame.dtypes.unique().tolist(),
                         [np.dtype(np.float32)])
        assert_close_to_pandas(result.frame, expected)
        self.assertEqual(sorted(result.states), sorted(frame["unique_id"]
                                                       .unique()))
        self.assertEqual(result.channels, ["y"])

        # GluonTS's names, given explicitly, give the same bytes; so does
        # the tz-aware column, whose zone then is the calendar's.
        gluonts = frame.rename(columns={"unique_id": "item_id",
                                        "ds": "timestamp", "y": "target"})
        gluonts["timestamp"] = gluonts["timestamp"].dt.tz_convert(ZONE)
        named = self.client.encode_frame(
            gluonts, series_column="item_id", time_column="timestamp",
            value_columns="target", spec=FRAME_SPEC)
        self.assertEqual(named.frame.to_numpy().tobytes(),
                         result.frame.to_numpy().tobytes())
        self.assertEqual(list(named.frame.columns),
                         [c.replace(".y", ".target") for c in
                          result.frame.columns])
        # Found by their names too; naive datetimes are UTC.
        naive = gluonts.assign(timestamp=gluonts["timestamp"].dt.tz_convert(
            "UTC").dt.tz_localize(None))
        found = self.client.encode_frame(naive, spec={"temporal": dict(
            FRAME_SPEC, calendar=dict(FRAME_SPEC["calendar"],
                                      time_zone=ZONE))})
        self.assertEqual(found.frame.to_numpy().tobytes(),
                         result.frame.to_numpy().tobytes())

    def test_frame_wide_datetime_index_equals_pandas(self):
        rng = np.random.default_rng(23)
        rows = 300
        times = (pd.Timestamp("2024-10-26 20:00", tz="Europe/Berlin")
                 + pd.to_timedelta(np.sort(rng.choice(30 * 24 * 60, rows,
                                                      replace=False)),
                                   unit="min"))
        values = rng.standard_normal((rows, 2))
        values[rng.random((rows, 2)) < 0.4] = np.nan
        frame = pd.DataFrame(values, columns=["temp", "load"],
                             index=pd.DatetimeIndex(times, name="when"))
        frame["site"] = rng.choice(["north", "south", "east"], rows)
        frame = frame.sample(frac=1.0, random_state=2)
        result = self.client.encode_frame(frame, series_column="site",
                                          spec=FRAME_SPEC)
        # The index's zone (Berlin, across its autumn DST change) is the
        # calendar zone.
        flat = frame.reset_index()
        flat.index = frame.index
        expected = pandas_features(flat.set_axis(range(rows)), "site", "when",
                                   ["temp", "load"], "Europe/Berlin")
        self.assertEqual(list(result.frame.columns), list(expected.columns))
        self.assertTrue(result.frame.index.equals(frame.index))
        assert_close_to_pandas(result.frame, expected)
        self.assertEqual(result.channels, ["temp", "load"])
        self.assertEqual(set(result.states), {"north", "south", "east"})
        # Per-series zones override the data's.
        zoned = self.client.encode_frame(
            frame, series_column="site", spec=FRAME_SPEC,
            time_zones={"north": "UTC", "south": "UTC", "east": "UTC"})
        np.testing.assert_allclose(
            zoned.frame["calendar.hour_of_day.sin"],
            np.sin(2 * np.pi * frame.index.tz_convert("UTC").hour / 24),
            atol=TOLERANCE)

    def test_frame_states_continue(self):
        rng = np.random.default_rng(29)
        frame = random_long_frame(rng, 6, list(range(6)))
        whole = self.client.encode_frame(frame, spec=FRAME_SPEC)
        cut = frame["ds"].quantile(0.5)
        early, late = frame[frame["ds"] <= cut], frame[frame["ds"] > cut]
        first = self.client.encode_frame(early, spec=FRAME_SPEC)
        second = self.client.encode_frame(late, spec=FRAME_SPEC,
                                          states=first.states)
        joined = pd.concat([first.frame, second.frame]).loc[frame.index]
        self.assertEqual(joined.to_numpy().tobytes(),
                         whole.frame.to_numpy().tobytes())

    def test_frame_long_with_channels(self):
        rng = np.random.default_rng(31)
        rows = 80
        frame = pd.DataFrame({
            "patient": rng.choice(["p1", "p2"], rows),
            "charttime": pd.Timestamp("2024-01-01") + pd.to_timedelta(
                rng.integers(0, 86400, rows), unit="s"),
            "item": rng.choice(["hr", "bp", "spo2"], rows),
            "valuenum": rng.standard_normal(rows)})
        gaps = {"include_mask": True, "include_last_value": True}
        result = self.client.encode_frame(
            frame, series_column="patient", time_column="charttime",
            channel_column="item", value_columns="valuenum", gaps=gaps)
        self.assertEqual(result.channels, ["bp", "hr", "spo2"])
        self.assertEqual(len(result.frame), rows)
        # Each series equals encode_events on its rows sorted by time.
        for patient, rows_of in frame.groupby("patient"):
            ordered = rows_of.sort_values("charttime", kind="stable")
            single = self.client.encode_events(
                ordered["charttime"], ordered["item"].to_numpy(),
                ordered["valuenum"], channel_names=result.channels, gaps=gaps)
            self.assertEqual(
                result.frame.loc[ordered.index].to_numpy().tobytes(),
                single.features.tobytes(), patient)
            self.assertEqual(result.states[patient], single.state)
        self.assert_invalid(lambda: self.client.encode_frame(
            frame, series_column="patient", time_column="charttime",
            channel_column="item", channels=["hr", "bp"], gaps=gaps),
            None, "spo2")

    def test_frame_unnamed_column_may_be_the_series(self):
        # Stations a and b a minute apart, an hour between readings: read
        # as one series the gaps would be [0, 60, 3540, 60].
        frame = pd.DataFrame({
            "station": ["a", "b", "a", "b"],
            "ts": pd.to_datetime(["2024-01-01 00:00", "2024-01-01 00:01",
                                  "2024-01-01 01:00", "2024-01-01 01:01"]),
            "temp": [1.0, 2.0, 3.0, 4.0]})
        gaps = {"per_channel_delta": False}
        for value_columns in (None, ["temp"]):
            with self.subTest(value_columns=value_columns):
                self.assert_invalid(lambda: self.client.encode_frame(
                    frame, time_column="ts", value_columns=value_columns,
                    gaps=gaps), "series_column", "'station'",
                    "series_column='station'", "drop")
        named = self.client.encode_frame(frame, time_column="ts",
                                         series_column="station", gaps=gaps)
        self.assertEqual(named.frame["gaps.global_delta"].tolist(),
                         [0, 0, 3600, 3600])
        # A MultiIndex level is a column too.
        self.assert_invalid(lambda: self.client.encode_frame(
            frame.set_index(["station", "ts"]), time_column="ts",
            gaps=gaps), "series_column", "index level 'station'")
        leveled = self.client.encode_frame(
            frame.set_index(["station", "ts"]), time_column="ts",
            series_column="station", gaps=gaps)
        self.assertEqual(leveled.frame.to_numpy().tobytes(),
                         named.frame.to_numpy().tobytes())
        # One value throughout cannot split rows: one series either way.
        one = frame.assign(station="a", note=pd.Series([None] * 4,
                                                        dtype=object))
        single = self.client.encode_frame(one, time_column="ts", gaps=gaps)
        self.assertEqual(single.frame["gaps.global_delta"].tolist(),
                         [0, 60, 3540, 60])
        # With the series named, other non-numeric columns are not values.
        noted = self.client.encode_frame(
            frame.assign(note=["x", "y", "z", "w"], ok=True),
            time_column="ts", series_column="station", gaps=gaps)
        self.assertEqual(noted.frame.to_numpy().tobytes(),
                         named.frame.to_numpy().tobytes())

    def test_frame_extra_numeric_column_is_named(self):
        rng = np.random.default_rng(37)
        frame = random_long_frame(rng, 5, [f"id{s}" for s in range(5)])
        frame["price"] = rng.standard_normal(len(frame))
        calendar = dict(FRAME_SPEC["calendar"], time_zone=ZONE)
        spec = dict(FRAME_SPEC, calendar=calendar)
        self.assert_invalid(lambda: self.client.encode_frame(
            frame, spec=spec), "value_columns", "['price']",
            "value_columns=['y', 'price']", "value_columns=['y']")
        both = self.client.encode_frame(frame, spec=spec,
                                        value_columns=["y", "price"])
        self.assertEqual(both.channels, ["y", "price"])
        assert_close_to_pandas(both.frame, pandas_features(
            frame, "unique_id", "ds", ["y", "price"], ZONE))
        only_y = self.client.encode_frame(frame, spec=spec,
                                          value_columns=["y"])
        plain = self.client.encode_frame(frame.drop(columns="price"),
                                         spec=spec)
        self.assertEqual(only_y.frame.to_numpy().tobytes(),
                         plain.frame.to_numpy().tobytes())
        # GluonTS's names, and the long layout's value found by name.
        gluonts = frame.rename(columns={"unique_id": "item_id",
                                        "ds": "timestamp", "y": "target"})
        self.assert_invalid(lambda: self.client.encode_frame(
            gluonts, spec=spec), "value_columns", "['price']")
        events = frame.assign(item=rng.choice(["hr", "bp"], len(frame)),
                              y=frame["y"].fillna(0.0))
        self.assert_invalid(lambda: self.client.encode_frame(
            events, series_column="unique_id", time_column="ds",
            channel_column="item", gaps=FRAME_SPEC["gaps"]),
            "value_columns", "['price']", "value_columns=['y']")
        kept = self.client.encode_frame(
            events, series_column="unique_id", time_column="ds",
            channel_column="item", value_columns="y",
            gaps=FRAME_SPEC["gaps"])
        self.assertEqual(kept.channels, ["bp", "hr"])

    def test_frame_integer_seconds_need_a_unit(self):
        hours = pd.DatetimeIndex(["2024-01-01 00:00", "2024-01-01 01:00",
                                  "2024-01-01 03:00"])
        spec = {"calendar": {"fields": ["hour_of_day"], "encoding": "index",
                             "time_zone": "UTC"},
                "gaps": {"per_channel_delta": False}}
        expected = self.client.encode_frame(
            pd.DataFrame({"t": hours, "v": [1.0, 2.0, 3.0]}),
            time_column="t", spec=spec)
        np.testing.assert_array_equal(expected.frame["gaps.global_delta"],
                                      [0, 3600, 7200])
        for unit, scale in (("s", 10**9), ("ms", 10**6)):
            frame = pd.DataFrame({"t": hours.asi8 // scale,
                                  "v": [1.0, 2.0, 3.0]})
            with self.subTest(unit):
                self.assert_invalid(lambda: self.client.encode_frame(
                    frame, time_column="t", spec=spec), "df['t']",
                    "time_unit='s'", "int64")
                got = self.client.encode_frame(frame, time_column="t",
                                               time_unit=unit, spec=spec)
                self.assertEqual(got.frame.to_numpy().tobytes(),
                                 expected.frame.to_numpy().tobytes())
        # One small value is as doubtful as many.
        self.assert_invalid(lambda: self.client.encode_frame(
            pd.DataFrame({"t": [1704096000], "v": [1.0]}), time_column="t",
            spec=spec), "df['t']", "time_unit")
        # Genuine int64 ns are read as they are, with or without the unit.
        for unit in (None, "ns"):
            nanoseconds = self.client.encode_frame(
                pd.DataFrame({"t": hours.asi8, "v": [1.0, 2.0, 3.0]}),
                time_column="t", time_unit=unit, spec=spec)
            self.assertEqual(nanoseconds.frame.to_numpy().tobytes(),
                             expected.frame.to_numpy().tobytes())
        # time_unit='ns' takes small integers at their word; zeros are the
        # epoch in every unit.
        small = self.client.encode_frame(
            pd.DataFrame({"t": [0, 3600], "v": [1.0, 2.0]}), time_column="t",
            time_unit="ns", spec=spec)
        np.testing.assert_allclose(small.frame["gaps.global_delta"],
                                   [0, 3.6e-6], rtol=1e-6)
        zeros = self.client.encode_frame(
            pd.DataFrame({"t": [0, 0], "v": [1.0, 2.0]}), time_column="t",
            spec=spec)
        self.assertEqual(zeros.frame["calendar.hour_of_day"].tolist(),
                         [0, 0])

    def sensor_frame(self, rng, lengths):
        """A wide frame of series sensor_0.. with `lengths` rows, shuffled,
        labelled r0.. in input order, and its panel order (each frame
        row's (series index, row within the series))."""
        parts = []
        for s, length in enumerate(lengths):
            times = pd.Timestamp("2024-05-01", tz="UTC") + pd.to_timedelta(
                np.sort(rng.choice(10**6, length, replace=False)), unit="s")
            parts.append(pd.DataFrame({
                "sensor": f"sensor_{s}", "when": times,
                "temp": rng.standard_normal(length),
                "load": rng.standard_normal(length)}))
        frame = pd.concat(parts, ignore_index=True).sample(
            frac=1.0, random_state=3)
        frame.index = [f"r{i}" for i in range(len(frame))]
        return frame

    def test_frame_server_errors_name_the_frame(self):
        rng = np.random.default_rng(41)
        frame = self.sensor_frame(rng, [40, 3000, 30, 2500])
        # The inf: series sensor_1, its 1700th row in time; the panel sent
        # orders series by first appearance.
        order = pd.unique(frame["sensor"]).tolist()
        series = frame[frame["sensor"] == "sensor_1"].sort_values("when")
        label = series.index[1700]
        row = frame.index.get_loc(label)
        frame.loc[label, "load"] = np.inf
        wire = (f"observations.series[{order.index('sensor_1')}]"
                f".values[{1700 * 2 + 1}]")
        spec = dict(FRAME_SPEC, calendar=dict(FRAME_SPEC["calendar"],
                                              time_zone=ZONE))
        seen = []
        # One request, then cut into chunks (client limit 64 KiB): the same
        # error either way.
        for max_bytes in (None, 1 << 16):
            with self.server.client(deadline_seconds=60,
                                    max_message_bytes=max_bytes) as client:
                counting = Counting(client._stub.EncodeObservations)
                client._stub.EncodeObservations = counting
                with self.assertRaises(FrameError) as raised:
                    client.encode_frame(frame, series_column="sensor",
                                        time_column="when", spec=spec)
                # The probe for F, then one request or many.
                self.assertEqual(counting.requests > 2,
                                 max_bytes is not None, counting.requests)
            error = raised.exception
            self.assertIsInstance(error, PhasorError)
            self.assertNotIsInstance(error, InvalidInputError)
            self.assertEqual(error.code(), grpc.StatusCode.INVALID_ARGUMENT)
            self.assertEqual((error.series_id, error.index_label, error.row,
                              error.column, error.wire_field),
                             ("sensor_1", label, row, "load", wire))
            self.assertEqual(error.field_violations()[0][0],
                             f"df['load'][{row}]")
            for words in (f"'{label}'", "'sensor_1'", "'load'", wire, "inf"):
                self.assertIn(words, error.details())
            seen.append((error.details(), error.field_violations()))
        self.assertEqual(seen[1], seen[0])

        # The long layout with channels: the event's value column and
        # channel; times from the index.
        events = frame.drop(columns="load").set_index("when")
        events["item"] = rng.choice(["hr", "bp"], len(events))
        events.iloc[7, events.columns.get_loc("temp")] = -np.inf
        with self.assertRaises(FrameError) as raised:
            self.client.encode_frame(
                events, series_column="sensor", time_column="when",
                channel_column="item", value_columns="temp",
                gaps=FRAME_SPEC["gaps"])
        error = raised.exception
        self.assertEqual((error.series_id, error.index_label, error.row,
                          error.column),
                         (events["sensor"].iloc[7], events.index[7], 7,
                          "temp"))
        self.assertEqual(error.field_violations()[0][0], "df['temp'][7]")
        self.assertIn(f"channel {events['item'].iloc[7]!r}", error.details())

    def test_frame_state_errors_name_the_series(self):
        rng = np.random.default_rng(43)
        frame = self.sensor_frame(rng, [20, 30])
        first = self.client.encode_frame(frame, series_column="sensor",
                                         time_column="when", spec=FRAME_SPEC)
        # sensor_0 goes on after its last time, sensor_1 from before it:
        # the server refuses sensor_1's first row, its earliest in `late`.
        late = self.sensor_frame(rng, [5, 5])
        late["when"] += pd.to_timedelta(
            np.where(late["sensor"] == "sensor_0", 30, 0), unit="D")
        new_times = late[late["sensor"] == "sensor_1"]["when"]
        self.assertLess(new_times.min(), frame[frame["sensor"] == "sensor_1"]
                        ["when"].max())
        earliest = new_times.idxmin()
        with self.assertRaises(FrameError) as raised:
            self.client.encode_frame(late, series_column="sensor",
                                     time_column="when", spec=FRAME_SPEC,
                                     states=first.states)
        error = raised.exception
        self.assertEqual((error.series_id, error.index_label, error.column),
                         ("sensor_1", earliest, "when"))
        self.assertEqual(error.field_violations()[0][0],
                         f"df['when'][{late.index.get_loc(earliest)}]")
        self.assertIn("decreasing", error.details())

    # -- errors -----------------------------------------------------------

    def test_server_errors_are_phasor_errors(self):
        times = pd.date_range("2024-01-01", periods=3, freq="h")
        cases = {
            "unary": lambda: self.client.encode_observations(
                times, time={"dim": 3}),
            "stream": lambda: list(self.client.encode_observations_stream(
                [times], time={"dim": 3})),
            "panel": lambda: self.client.encode_panel(
                times, series_offsets=[0, 3], time={"dim": 3}),
            "frame": lambda: self.client.encode_frame(
                pd.DataFrame(index=times), time={"dim": 3}),
            "positions": lambda: self.client.encode_positions(count=2,
                                                              dim=3),
        }
        for name, call in cases.items():
            with self.subTest(name):
                with self.assertRaises(PhasorError) as raised:
                    call()
                error = raised.exception
                self.assertNotIsInstance(error, InvalidInputError)
                self.assertIsInstance(error, grpc.RpcError)
                self.assertEqual(error.code(),
                                 grpc.StatusCode.INVALID_ARGUMENT)
                self.assertIn("dim", error.details())
                self.assertEqual(error.message, error.details())
                self.assertTrue(error.field_violations(), error)
                self.assertEqual(field_violations(error),
                                 error.field_violations())


if __name__ == "__main__":
    unittest.main(verbosity=2)
