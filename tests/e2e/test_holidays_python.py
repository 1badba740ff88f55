"""Holiday features through a real phasor-server, against values computed
here independently:

- GLUONTS distance mode against GluonTS's holiday feature re-derived from
  its published formulas (gluonts/time_feature/holiday.py:
  distance_to_holiday with MAX_WINDOW = 183 + 17 over pandas Holiday rules,
  exponential_kernel / squared_exponential_kernel with tol = 1e-9), on daily
  and hourly rows;
- days_since / days_until against numpy searchsorted over the dates;
- one column group per named set, named by the set in the schema;
- an empty date list giving zeros;
- built-in country calendars against Debian's python3-holidays on a sample
  of years of every calendar the generator writes.
"""

import importlib.util
import os
import unittest

import numpy as np
import pandas as pd
from pandas.tseries.holiday import (SU, TH, EasterMonday, GoodFriday,
                                    Holiday, USLaborDay, USMemorialDay,
                                    USThanksgivingDay)
from pandas.tseries.offsets import DateOffset, Day, Easter

import harness
from phasor_client import pb

# --- GluonTS's holiday feature, re-derived --------------------------------
# gluonts/time_feature/holiday.py: MAX_WINDOW covers half a year both ways
# (183) plus Easter's movement (17).
GLUONTS_WINDOW = pd.Timedelta(days=183 + 17)
GLUONTS_TOL = 1e-9

# Rules of the kinds GluonTS's SPECIAL_DATE_FEATURES use: fixed dates,
# Easter-relative ones and n-th weekday ones.
RULES = {
    "christmas": Holiday("Christmas", month=12, day=25),
    "easter_sunday": Holiday("Easter Sunday", month=1, day=1,
                             offset=[Easter(), Day(0)]),
    "easter_monday": EasterMonday,
    "good_friday": GoodFriday,
    "superbowl": Holiday("Superbowl", month=2, day=1,
                         offset=DateOffset(weekday=SU(1))),
    "thanksgiving": USThanksgivingDay,
    "labor_day": USLaborDay,
    "memorial_day": USMemorialDay,
    "black_friday": Holiday("Black Friday", month=11, day=1,
                            offset=[DateOffset(weekday=TH(4)), Day(1)]),
}


def gluonts_distance(rule, instant):
    """GluonTS's distance_to_holiday for one instant: days from the earliest
    rule date in [t - 200 d, t + 200 d] to t (Timedelta.days floors), or
    None (where GluonTS asserts)."""
    dates = rule.dates(instant - GLUONTS_WINDOW, instant + GLUONTS_WINDOW)
    if len(dates) == 0:
        return None
    return (instant - dates[0]).days


def gluonts_distances(rule_dates, instants):
    """gluonts_distance for many instants at once, from the rule's dates
    over a range that covers every window (rule.dates per instant costs a
    millisecond each); NaN where there is none. Checked against
    gluonts_distance on a sample."""
    starts = rule_dates.searchsorted(instants - GLUONTS_WINDOW, side="left")
    found = starts < len(rule_dates)
    earliest = rule_dates[np.minimum(starts, len(rule_dates) - 1)]
    found &= earliest <= instants + GLUONTS_WINDOW
    days = (instants - earliest).days.values.astype(float)
    days[~found] = np.nan
    return days


def gluonts_kernel(kind, alpha, distances):
    """GluonTS's indicator / exponential_kernel / squared_exponential_kernel
    (tol 1e-9: values not above it are 0); 0 where there is no holiday."""
    if kind == "INDICATOR":
        values = (distances == 0).astype(float)
    elif kind == "EXPONENTIAL":
        values = np.exp(-alpha * np.abs(distances))
    else:
        values = np.exp(-alpha * np.abs(distances) ** 2)
    if kind != "INDICATOR":
        values = np.where(values > GLUONTS_TOL, values, 0.0)
    return np.where(np.isnan(distances), 0.0, values)


def iso(dates):
    return [d.strftime("%Y-%m-%d") for d in dates]


def load_generator():
    path = os.path.join(harness.SOURCE_DIR, "server", "holidays",
                        "gen_builtin_holidays.py")
    spec = importlib.util.spec_from_file_location("gen_builtin_holidays", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class HolidaysTest(harness.ServerTestCase):

    CLIENT_DEADLINE_SECONDS = 60

    def encode(self, index, holidays, time_zone="UTC"):
        times = np.asarray(index.asi8, dtype=np.int64)
        result = self.client.encode_observations(
            times, spec=dict(calendar={"time_zone": time_zone,
                                       "holidays": holidays}),
            output_dtype="float64")
        return result.features, [entry.block for entry in result.schema]

    def test_gluonts_mode_reproduces_gluonts_features(self):
        rule_dates = {name: rule.dates("1995-01-01", "2025-12-31")
                      for name, rule in RULES.items()}
        sets = [{"name": name, "dates": iso(dates)}
                for name, dates in rule_dates.items()]
        daily = pd.date_range("2000-01-01", "2020-12-31", freq="D")
        # Hourly rows: pandas compares timestamps, so a row after midnight
        # sees a window one day shorter at its start.
        hourly = pd.date_range("2016-01-01", "2016-12-31 23:00", freq="7h")
        rng = np.random.default_rng(7)
        distances = {}
        for label, index in (("daily", daily), ("hourly", hourly)):
            distances[label] = np.stack(
                [gluonts_distances(rule_dates[name], index)
                 for name in RULES], axis=1)
            # The vectorised distances are GluonTS's per-instant ones.
            for row in rng.choice(len(index), 60, replace=False):
                for column, rule in enumerate(RULES.values()):
                    want = gluonts_distance(rule, index[row])
                    got = distances[label][row, column]
                    if want is None:
                        self.assertTrue(np.isnan(got))
                    else:
                        self.assertEqual(got, want, (index[row], column))
        # Some hourly rows hit that edge (a holiday 200 days before their
        # midnight), so the server's after-midnight columns are exercised.
        at_midnight = np.stack(
            [gluonts_distances(rule_dates[name], hourly.normalize())
             for name in RULES], axis=1)
        self.assertGreater(
            int(np.sum(~np.isclose(at_midnight, distances["hourly"],
                                   equal_nan=True))), 0)
        checked = 0
        nonzero = 0
        for kind, alpha in (("INDICATOR", 1.0), ("EXPONENTIAL", 0.05),
                            ("SQUARED_EXPONENTIAL", 0.02)):
            for label, index in (("daily", daily), ("hourly", hourly)):
                features, blocks = self.encode(
                    index, {"sets": sets, "kernel": kind, "alpha": alpha,
                            "distance_mode": "GLUONTS"})
                self.assertEqual(blocks, [f"calendar.holidays.{name}"
                                          for name in RULES])
                want = gluonts_kernel(kind, alpha, distances[label])
                self.assertEqual(features.shape, want.shape)
                # Zeros (clipped or far) exactly where GluonTS has them.
                np.testing.assert_array_equal(features == 0, want == 0)
                np.testing.assert_allclose(features, want, rtol=4e-16,
                                           atol=0)
                checked += want.size
                nonzero += int(np.count_nonzero(want))
        self.assertGreater(checked, 100000)
        self.assertGreater(nonzero, 10000)

    def test_gluonts_differs_from_nearest_where_gluonts_does(self):
        # Christmas and the next Easter: early in the year the earliest
        # holiday in the window is last Christmas though Easter is nearer.
        dates = iso(RULES["christmas"].dates("2015-01-01", "2017-12-31")) + \
            iso(RULES["easter_sunday"].dates("2015-01-01", "2017-12-31"))
        index = pd.date_range("2016-01-01", "2016-12-31", freq="D")
        spec = {"dates": dates, "kernel": "EXPONENTIAL", "alpha": 0.1}
        gluonts, _ = self.encode(index, dict(spec, distance_mode="GLUONTS"))
        nearest, _ = self.encode(index, spec)
        day = list(index).index(pd.Timestamp("2016-03-20"))  # Easter Mar 27
        self.assertAlmostEqual(nearest[day, 0], np.exp(-0.1 * 7), places=15)
        self.assertAlmostEqual(gluonts[day, 0], np.exp(-0.1 * 86), places=15)

    def test_days_since_and_until(self):
        dates = pd.to_datetime(["2019-12-25", "2020-02-29", "2020-07-04",
                                "2021-01-01"])
        index = pd.date_range("2019-06-01", "2021-06-30 18:00", freq="5h",
                              tz="America/New_York")
        features, blocks = self.encode(
            index, {"dates": iso(dates), "include_days_since": True,
                    "include_days_until": True, "max_distance_days": 120},
            time_zone="America/New_York")
        self.assertEqual(blocks, ["calendar.holidays",
                                  "calendar.holidays.days_since",
                                  "calendar.holidays.days_until"])
        local = index.tz_localize(None).normalize()
        days = dates.values.astype("datetime64[D]").astype(np.int64)
        row_days = local.values.astype("datetime64[D]").astype(np.int64)
        after = np.searchsorted(days, row_days, side="right")
        since = np.full(len(index), -1.0)
        has = after > 0
        since[has] = row_days[has] - days[after[has] - 1]
        since[since > 120] = -1.0
        before = np.searchsorted(days, row_days, side="left")
        until = np.full(len(index), -1.0)
        has = before < len(days)
        until[has] = days[before[has]] - row_days[has]
        until[until > 120] = -1.0
        np.testing.assert_array_equal(features[:, 1], since)
        np.testing.assert_array_equal(features[:, 2], until)
        np.testing.assert_array_equal(features[:, 0],
                                      (since == 0).astype(float))
        # All three cases occur: on a holiday, in the window, none in it.
        for column in (since, until):
            self.assertTrue((column == 0).any())
            self.assertTrue((column > 0).any())
            self.assertTrue((column == -1).any())

    def test_sets_and_empty_list(self):
        index = pd.date_range("2024-12-20", "2025-01-05", freq="D")
        # With sets and no dates or calendar there is no unnamed column.
        features, blocks = self.encode(index, {
            "kernel": "SQUARED_EXPONENTIAL", "alpha": 0.5,
            "include_days_until": True,
            "sets": [{"name": "christmas", "dates": ["2024-12-25"]},
                     {"name": "new_year", "dates": ["2025-01-01"]},
                     {"name": "none"}]})
        self.assertEqual(blocks, [
            "calendar.holidays.christmas",
            "calendar.holidays.christmas.days_until",
            "calendar.holidays.new_year",
            "calendar.holidays.new_year.days_until",
            "calendar.holidays.none", "calendar.holidays.none.days_until"])
        d_christmas = (index - pd.Timestamp("2024-12-25")).days.values
        d_new_year = (index - pd.Timestamp("2025-01-01")).days.values
        np.testing.assert_allclose(features[:, 0],
                                   np.exp(-0.5 * d_christmas ** 2.0),
                                   rtol=4e-16)
        np.testing.assert_allclose(features[:, 2],
                                   np.exp(-0.5 * d_new_year ** 2.0),
                                   rtol=4e-16)
        np.testing.assert_array_equal(features[:, 3],
                                      np.maximum(-d_new_year, -1))
        # The empty set: a zero kernel and no holiday ahead.
        np.testing.assert_array_equal(features[:, 4], 0.0)
        np.testing.assert_array_equal(features[:, 5], -1.0)
        # An empty block (a country with no holidays in range) is one zero
        # column, not an error.
        features, blocks = self.encode(index, {"kernel": "EXPONENTIAL"})
        self.assertEqual(blocks, ["calendar.holidays"])
        np.testing.assert_array_equal(features, 0.0)

    def test_bad_set_name_names_the_field(self):
        index = pd.date_range("2024-12-20", periods=3, freq="D")
        with self.assertRaises(Exception) as caught:
            self.encode(index, {"sets": [{"name": "a.b", "dates": []}]})
        self.assertIn("calendar.holidays.sets[0].name", str(caught.exception))
        self.assertIn("INVALID_ARGUMENT", str(caught.exception))

    def test_builtin_calendars_match_the_library(self):
        import holidays as library
        generator = load_generator()
        listed = self.client._call(self.client._stub.ListProfiles,
                                   pb.ListProfilesRequest())
        self.assertEqual(list(listed.builtin_holiday_calendars),
                         sorted(generator.COUNTRIES))
        self.assertGreaterEqual(len(listed.builtin_holiday_calendars), 20)
        rng = np.random.default_rng(12)
        for name, (code, kwargs) in sorted(generator.COUNTRIES.items()):
            years = [1900, 2026, 2200] + list(rng.integers(1900, 2201, 3))
            for year in years:
                year = int(year)
                want = set()
                # Year by year, as the library raises NotImplementedError
                # outside its range (JP before 1949): no dates there. The
                # neighbours count for observed days that cross a new year.
                for near in (year - 1, year, year + 1):
                    try:
                        table = getattr(library, code)(years=[near], **kwargs)
                    except NotImplementedError:
                        continue
                    want |= {d for d in table if d.year == year}
                index = pd.date_range(f"{year}-01-01 12:00",
                                      f"{year}-12-31 12:00", freq="D")
                features, _ = self.encode(index, {"calendar": name})
                got = {t.date() for t, v in zip(index, features[:, 0])
                       if v == 1.0}
                self.assertEqual(got, want, f"{name} {year}")


if __name__ == "__main__":
    unittest.main()
