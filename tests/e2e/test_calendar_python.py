"""Calendar years, flags, zero-based indices, per-field Fourier orders and
the time block's explicit periods through the Python client against a real
phasor-server, each compared with values computed here independently:
pandas' tz_convert and dt accessors (zoneinfo/tzdata) for the local calendar,
and numpy re-derivations of Prophet's fourier_series
(prophet/forecaster.py) and statsmodels' CalendarFourier
(statsmodels/tsa/deterministic.py) for the harmonics."""

import math
import unittest

import numpy as np
import pandas as pd
from zoneinfo import ZoneInfo

import harness
from phasor_client import PhasorError, feature_names

NS = 10**9
ZONES = ["UTC", "America/New_York", "Australia/Lord_Howe", "Asia/Kathmandu",
         "Pacific/Apia"]


def instants(rng, count):
    """Sorted nanosecond instants: random ones 1900..2200, every local
    midnight ±1 ns around month and quarter ends of 2024-2026 in a few
    zones, and New Year's weeks (ISO year != year)."""
    lo = pd.Timestamp("1900-01-01", tz="UTC").value
    hi = pd.Timestamp("2200-01-01", tz="UTC").value
    picks = list(rng.integers(lo, hi, size=count))
    for zone in ["America/New_York", "Pacific/Apia", "Asia/Kathmandu"]:
        for day in pd.date_range("2024-01-01", "2026-12-31", freq="MS",
                                 tz=zone):
            for edge in (day, day - pd.Timedelta(1, "ns")):
                picks.append(edge.value)
    for year in (2020, 2021, 2026, 2027, 2099):
        for day in pd.date_range(f"{year - 1}-12-26", f"{year}-01-05",
                                 freq="13H", tz="UTC"):
            picks.append(day.value)
    return np.sort(np.array(picks, dtype=np.int64))


def local(times, zone):
    # zoneinfo, not pandas' default pytz: pytz gives New York's LMT (−4:56)
    # to instants of 1900 and has no rules past 2037.
    return pd.DatetimeIndex(pd.to_datetime(times, unit="ns", utc=True)) \
        .tz_convert(ZoneInfo(zone))


class CalendarAdditionsTest(harness.ServerTestCase):

    CLIENT_DEADLINE_SECONDS = 60

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.times = instants(np.random.default_rng(12), 3000)

    def encode(self, calendar=None, time=None, times=None):
        return self.client.encode_observations(
            self.times if times is None else times, calendar=calendar,
            time=time, output_dtype="float64")

    def test_years_and_flags_are_pandas_dt_accessors(self):
        fields = ["year", "iso_year", "is_weekend", "is_month_start",
                  "is_month_end", "is_quarter_start", "is_quarter_end"]
        for zone in ZONES:
            t = local(self.times, zone)
            iso_year = t.isocalendar().year.to_numpy().astype(float)
            flags = np.column_stack([
                t.dayofweek >= 5, t.is_month_start, t.is_month_end,
                t.is_quarter_start, t.is_quarter_end]).astype(float)
            index = self.encode(dict(time_zone=zone, fields=fields,
                                     encoding="index"))
            np.testing.assert_array_equal(index.features[:, 0], t.year)
            np.testing.assert_array_equal(index.features[:, 1], iso_year)
            np.testing.assert_array_equal(index.features[:, 2:], flags,
                                          err_msg=zone)
            self.assertGreater(flags.sum(axis=0).min(), 0)
            # LINEAR on the stated range; CYCLIC gives the years' LINEAR
            # column (a year has no period) and the same flags.
            for encoding in ("linear", "cyclic"):
                linear = self.encode(dict(
                    time_zone=zone, fields=fields, encoding=encoding,
                    min_year=1950, max_year=2050))
                np.testing.assert_allclose(
                    linear.features[:, 0], (t.year - 1950) / 100 - 0.5,
                    rtol=0, atol=1e-15)
                np.testing.assert_allclose(
                    linear.features[:, 1], (iso_year - 1950) / 100 - 0.5,
                    rtol=0, atol=1e-15)
                np.testing.assert_array_equal(linear.features[:, 2:], flags)
            self.assertEqual(
                feature_names(index.schema),
                [f"calendar.{name}" for name in fields])

    def test_zero_based_index_is_gluonts_index(self):
        # gluonts/time_feature/_base.py *_index features: 0-based.
        fields = ["second_of_minute", "minute_of_hour", "hour_of_day",
                  "day_of_week", "day_of_month", "day_of_year",
                  "week_of_year", "month_of_year", "quarter", "year"]
        zone = "America/New_York"
        t = local(self.times, zone)
        expected = np.column_stack([
            t.second, t.minute, t.hour, t.dayofweek, t.day - 1,
            t.dayofyear - 1, t.isocalendar().week.to_numpy() - 1,
            t.month - 1, t.quarter - 1, t.year - 1900]).astype(float)
        out = self.encode(dict(time_zone=zone, fields=fields,
                               encoding="index", zero_based_index=True,
                               min_year=1900))
        np.testing.assert_array_equal(out.features, expected)
        one_based = self.encode(dict(time_zone=zone, fields=fields[:9],
                                     encoding="index"))
        np.testing.assert_array_equal(
            one_based.features - out.features[:, :9],
            np.tile([0, 0, 0, 0, 1, 1, 1, 1, 1], (len(self.times), 1)))

    def test_fourier_orders_are_calendar_fourier_harmonics(self):
        # statsmodels CalendarFourier(freq, order): ratio r = elapsed part of
        # the calendar period holding t, terms sin(2πkr), cos(2πkr) for
        # k = 1..order. In UTC its "A", "M", "W" and "D" periods are the
        # fractional day_of_year, day_of_month, day_of_week and hour_of_day.
        t = local(self.times, "UTC")
        ns = self.times.astype(object)

        def ratio(freq):
            periods = t.tz_localize(None).to_period(freq)
            start = periods.start_time.values.astype(np.int64)
            end = (periods + 1).start_time.values.astype(np.int64)
            elapsed = np.array([n - s for n, s in zip(ns, start)], dtype=float)
            return elapsed / (end - start).astype(float)

        fields = ["day_of_year", "day_of_month", "day_of_week", "hour_of_day"]
        orders = [10, 4, 3, 2]
        out = self.encode(dict(fields=fields, fourier_orders=orders,
                               fractional=True))
        self.assertEqual(out.features.shape[1], 2 * sum(orders))
        column = 0
        for freq, order in zip(["A", "M", "W", "D"], orders):
            r = ratio(freq)
            for k in range(1, order + 1):
                np.testing.assert_allclose(
                    out.features[:, column], np.sin(2 * np.pi * k * r),
                    rtol=0, atol=1e-12, err_msg=f"{freq} sin {k}")
                np.testing.assert_allclose(
                    out.features[:, column + 1], np.cos(2 * np.pi * k * r),
                    rtol=0, atol=1e-12, err_msg=f"{freq} cos {k}")
                column += 2
        names = feature_names(out.schema)
        self.assertEqual(names[:4], ["calendar.day_of_year.sin_1",
                                     "calendar.day_of_year.cos_1",
                                     "calendar.day_of_year.sin_2",
                                     "calendar.day_of_year.cos_2"])
        # Integer fields: harmonics of the civil x over the calendar-true P.
        zone = "Australia/Lord_Howe"
        lt = local(self.times, zone)
        out = self.encode(dict(time_zone=zone,
                               fields=["month_of_year", "week_of_year"],
                               fourier_orders=[6, 3]))
        weeks = np.where(
            pd.DatetimeIndex([f"{y}-12-28" for y in
                              lt.isocalendar().year]).isocalendar().week
            == 53, 53, 52)
        for x, period, order, first in (
                (lt.month - 1, 12, 6, 0),
                (lt.isocalendar().week.to_numpy() - 1, weeks, 3, 12)):
            for k in range(1, order + 1):
                angle = 2 * np.pi * k * np.asarray(x, float) / period
                np.testing.assert_allclose(
                    out.features[:, first + 2 * k - 2], np.sin(angle),
                    rtol=0, atol=1e-12)
                np.testing.assert_allclose(
                    out.features[:, first + 2 * k - 1], np.cos(angle),
                    rtol=0, atol=1e-12)

    def test_explicit_periods_are_prophets_fourier_series(self):
        # Prophet's fourier_series: t = whole seconds since the epoch in
        # days; columns sin(2π·k·t/period), cos(...) for k = 1..order.
        whole = (self.times // NS) * NS
        days = (whole // NS) / (3600 * 24.0)
        seasonalities = [(365.25, 10), (7, 3), (30.5, 5)]
        out = self.encode(time={
            "origin": "unix_epoch",
            "periods": [{"period_seconds": p * 86400, "order": k}
                        for p, k in seasonalities]}, times=whole)
        self.assertEqual(out.features.shape[1], 36)
        column = 0
        for period, order in seasonalities:
            for k in range(1, order + 1):
                # Prophet's double angle 2π·k·t/P reaches ~3e5 rad, where
                # a double is ~6e-11 rad coarse (the server reduces the
                # phase exactly): compare with the exact phase, from integer
                # nanoseconds, then with Prophet's formula to that size.
                period_ns = round(period * 86400 * NS)
                phase = np.array([(int(n) * k) % period_ns for n in whole],
                                 dtype=float) / period_ns
                np.testing.assert_allclose(
                    out.features[:, column], np.sin(2 * np.pi * phase),
                    rtol=0, atol=1e-14)
                np.testing.assert_allclose(
                    out.features[:, column + 1], np.cos(2 * np.pi * phase),
                    rtol=0, atol=1e-14)
                cycle = days * np.pi * 2 * k / period
                np.testing.assert_allclose(
                    out.features[:, column], np.sin(cycle), rtol=0, atol=1e-9)
                np.testing.assert_allclose(
                    out.features[:, column + 1], np.cos(cycle), rtol=0,
                    atol=1e-9)
                column += 2
        described = self.client.describe(spec={"temporal": {"time": {
            "periods": [{"period_seconds": 604800, "order": 3}]}}},
            num_offsets=4)
        np.testing.assert_allclose(list(described.wavelengths),
                                   [604800, 302400, 201600])

    def test_bad_inputs_name_the_field(self):
        cases = [
            (dict(calendar=dict(fields=["year"], encoding="linear")),
             "spec.temporal.calendar.min_year"),
            (dict(calendar=dict(fields=["year"], encoding="linear",
                                min_year=2000, max_year=1990)),
             "spec.temporal.calendar.max_year"),
            (dict(calendar=dict(fields=["hour_of_day"],
                                zero_based_index=True)),
             "spec.temporal.calendar.zero_based_index"),
            (dict(calendar=dict(fields=["hour_of_day", "is_weekend"],
                                fourier_orders=[2, 2])),
             "spec.temporal.calendar.fourier_orders[1]"),
            (dict(calendar=dict(fields=["hour_of_day"],
                                fourier_orders=[2, 2])),
             "spec.temporal.calendar.fourier_orders"),
            (dict(time={"periods": [{"period_seconds": 60, "order": -1}]}),
             "spec.temporal.time.periods[0].order"),
            (dict(time={"periods": [{"period_seconds": 0}]}),
             "spec.temporal.time.periods[0].period_seconds"),
            (dict(time={"dim": 4, "periods": [{"period_seconds": 60,
                                                "order": 3}]}),
             "spec.temporal.time.dim"),
            (dict(time={"min_period_seconds": 2,
                        "periods": [{"period_seconds": 60}]}),
             "spec.temporal.time.min_period_seconds"),
        ]
        for blocks, field in cases:
            with self.assertRaises(PhasorError, msg=field) as caught:
                self.client.encode_observations(self.times[:5], **blocks)
            self.assertIn(field, str(caught.exception))
            self.assertIn("INVALID_ARGUMENT", str(caught.exception))


if __name__ == "__main__":
    unittest.main()
