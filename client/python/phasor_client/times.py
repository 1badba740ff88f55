"""Timestamps in: what the client reads without doubt, and errors for the rest.

phasor.v1 takes times as INT64 ns since the Unix epoch (UTC) or FLOAT64
seconds since the epoch (encoder.proto, Observations). A bare number array
does not say its unit: float seconds (`index.asi8 / 1e9`) sent as ns come back
"OK" with every row in the same hour of 1970 and gaps a billion times too
small. So the client reads only what is unambiguous:

  * numpy datetime64 of any unit (converted to ns exactly; a value out of the
    int64 ns range is an error, not a wrap);
  * pandas DatetimeIndex / Series / arrays of datetimes, naive (taken as UTC)
    or tz-aware (converted to UTC; the zone is reported so that the calendar
    block can use it), and object arrays of datetime / pandas.Timestamp;
  * integer arrays as ns since the epoch (the proto's own encoding) — but
    with refuse_near_epoch_ints (encode_frame's choice), integers without
    time_unit that all lie within one day of the epoch when read as ns are
    an error like floats without one: such values can only be seconds
    (1704096000 is 2024-01-01 in s, 1.7 s after the epoch in ns) or
    milliseconds (1.7e12 ms is 2024, 28 min as ns); a one-hour gap in
    seconds read as ns is 3.6 µs. All zeros are read, since 0 is the same
    instant in every unit;
  * plain numbers in another unit only with time_unit= ("s", "ms", "us",
    "ns"): float seconds travel as FLOAT64 seconds (the server rounds to the
    nearest ns), other floats are scaled to ns and rounded, integers scaled
    exactly.

A float array without time_unit, float16/float32 (too coarse for a
timestamp: float32 resolves 128 s near 2024), booleans, strings and complex
numbers are InvalidInputError naming the argument and what to send. NaT, NaN
and ±Inf are errors naming the row (and, for pandas input, its index label).

Thread-safety: pure functions.
"""

import collections
import datetime
from typing import Any, Optional

import numpy as np

from .errors import InvalidInputError

try:  # pandas is optional for numpy-only callers.
    import pandas as pd
except ImportError:  # pragma: no cover - Debian's python3-pandas is present
    pd = None

# ns per unit for time_unit=.
_NS_PER_UNIT = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}
_NAT = np.iinfo(np.int64).min
# ns in one day: integers without a unit that all lie within this distance
# of the epoch are seconds or milliseconds (2024 is 1.7e9 s, 1.7e12 ms),
# never ns of real data (ns since the epoch passed 8.64e13 on 1970-01-02).
_NEAR_EPOCH_NS = 86_400 * 10**9
_WHAT_TO_SEND = ("give int64 ns since the epoch, numpy datetime64, a pandas "
                 "DatetimeIndex / datetime Series, or numbers with "
                 "time_unit='s' (or 'ms', 'us', 'ns')")

Times = collections.namedtuple("Times", ["array", "wire_dtype", "time_zone"])
Times.__doc__ = """Times ready for a Tensor: `array` 1-D (int64 ns, or
float64 seconds when wire_dtype is "float64"), `wire_dtype` "int64" or
"float64", `time_zone` the IANA name of tz-aware input, else None."""


def zone_name(tz: Any) -> str:
    """The IANA name of a tzinfo (zoneinfo, pytz, dateutil, UTC, whole-hour
    fixed offsets as Etc/GMT∓h); ValueError when it has none."""
    if tz is None:
        raise ValueError("no time zone")
    key = getattr(tz, "key", None)  # zoneinfo.ZoneInfo
    if isinstance(key, str):
        return key
    zone = getattr(tz, "zone", None)  # pytz
    if isinstance(zone, str):
        return zone
    if tz is datetime.timezone.utc or str(tz) in ("UTC", "tzutc()"):
        return "UTC"
    filename = getattr(tz, "_filename", None)  # dateutil.tz.gettz(name)
    if isinstance(filename, str) and not filename.startswith("/"):
        return filename
    offset = tz.utcoffset(None) if hasattr(tz, "utcoffset") else None
    if isinstance(offset, datetime.timedelta):
        seconds = int(offset.total_seconds())
        if seconds == 0:
            return "UTC"
        if seconds % 3600 == 0:
            # POSIX sign: Etc/GMT-1 is one hour EAST of Greenwich.
            return f"Etc/GMT{-seconds // 3600:+d}"
    raise ValueError(f"time zone {tz!r} has no IANA name")


def _row_name(row: int, labels) -> str:
    if labels is None:
        return f"row {row}"
    return f"row {row} (index label {labels[row]!r})"


def _check_no_nat(ns: np.ndarray, field: str, labels) -> None:
    bad = np.flatnonzero(ns == _NAT)
    if len(bad):
        row = int(bad[0])
        raise InvalidInputError(
            f"{field}[{row}]",
            f"NaT at {_row_name(row, labels)}"
            f"{f' and {len(bad) - 1} more rows' if len(bad) > 1 else ''}; "
            f"every row needs a time (drop or fill those rows)")


def _check_finite(values: np.ndarray, field: str, labels) -> None:
    bad = np.flatnonzero(~np.isfinite(values))
    if len(bad):
        row = int(bad[0])
        raise InvalidInputError(
            f"{field}[{row}]",
            f"{values[row]} at {_row_name(row, labels)} is not a time")


def _from_pandas_datetimes(values, field, labels):
    """(int64 ns, zone or None) of a pandas datetime-like (naive or aware)."""
    index = pd.DatetimeIndex(values)
    zone = None
    if index.tz is not None:
        try:
            zone = zone_name(index.tz)
        except ValueError as error:
            raise InvalidInputError(
                field, f"{error}: convert with .tz_convert('<IANA zone>') or "
                       f"give the calendar's time_zone") from None
        index = index.tz_convert("UTC").tz_localize(None)
    ns = index.as_unit("ns").asi8 if hasattr(index, "as_unit") else \
        index.asi8
    ns = np.asarray(ns, dtype=np.int64)
    _check_no_nat(ns, field, labels)
    return ns, zone


def read_times(times: Any, field: str = "timestamps",
               time_unit: Optional[str] = None, labels=None,
               refuse_near_epoch_ints: bool = False) -> Times:
    """Times for the wire from anything the client reads without doubt.

    field names the argument in errors ("timestamps", "event_times",
    "df['ds']"); labels (a pandas Index) name rows in NaT errors.
    time_unit: None, or "s", "ms", "us", "ns" for plain numbers (ignored by
    datetime input, which carries its unit). refuse_near_epoch_ints: without
    time_unit, integers that are not all zero and all lie within one day of
    the epoch when read as ns are an error (they can only be seconds or
    milliseconds); False reads them as ns, as the array methods always
    have. Raises InvalidInputError.
    """
    if time_unit is not None and time_unit not in _NS_PER_UNIT:
        raise InvalidInputError(
            "time_unit", f"{time_unit!r} is not one of 's', 'ms', 'us', 'ns'")
    if pd is not None:
        if labels is None and isinstance(times, pd.Series):
            labels = times.index
        if isinstance(times, (pd.DatetimeIndex, pd.Series, pd.Index)) and \
                isinstance(times.dtype, pd.DatetimeTZDtype):
            return _aware(times, field, labels)
        if isinstance(times, (pd.Series, pd.Index)):
            times = times.to_numpy()
    values = np.asarray(times)
    if values.ndim != 1:
        raise InvalidInputError(field, f"expected a 1-D array of times, got "
                                       f"shape {values.shape}")
    kind = values.dtype.kind
    if kind == "M":
        ns = values.astype("datetime64[ns]")
        # numpy wraps on overflow (and truncates units finer than ns): a
        # value that does not come back through the round trip was lost.
        nat = np.isnat(values)
        if np.any(ns[~nat].astype(values.dtype) != values[~nat]) or \
                np.any(np.isnat(ns[~nat])):
            row = int(np.flatnonzero(~nat & (
                (ns.astype(values.dtype) != values) | np.isnat(ns)))[0])
            raise InvalidInputError(
                f"{field}[{row}]",
                f"{values[row]} at {_row_name(row, labels)} is not "
                f"representable as int64 ns (years 1678-2262, ns "
                f"resolution)")
        ns = ns.view(np.int64)
        ns = np.asarray(ns, dtype=np.int64)
        _check_no_nat(ns, field, labels)
        return Times(ns, "int64", None)
    if kind == "O":
        if pd is not None and len(values) and pd.api.types.infer_dtype(
                values, skipna=True) in ("datetime", "datetime64", "date"):
            try:
                index = pd.DatetimeIndex(values)
            except (TypeError, ValueError) as error:
                raise InvalidInputError(
                    field, f"{error} (mixed time zones: convert to UTC with "
                           f"pd.to_datetime(..., utc=True) and give the "
                           f"calendar's time_zone)") from None
            if index.tz is not None:
                return _aware(index, field, labels)
            ns, _ = _from_pandas_datetimes(index, field, labels)
            return Times(ns, "int64", None)
        raise InvalidInputError(field, f"objects of type "
                                       f"{type(values[0]).__name__ if len(values) else '?'}"
                                       f" are not times; {_WHAT_TO_SEND}")
    if kind in "iu":
        if kind == "u" and len(values) and values.max() > np.iinfo(np.int64).max:
            raise InvalidInputError(field, "uint64 times beyond int64")
        ints = values.astype(np.int64, copy=False)
        if (refuse_near_epoch_ints and time_unit is None and len(ints)
                and np.any(ints != 0)
                and np.all(np.abs(ints.astype(np.float64))
                           < _NEAR_EPOCH_NS)):
            largest = int(np.max(np.abs(ints.astype(np.float64))))
            raise InvalidInputError(
                field, f"{values.dtype} times have no unit and all lie "
                       f"within one day of the epoch when read as ns "
                       f"(largest |t| {largest}): seconds or milliseconds "
                       f"read as ns would be 10^9 or 10^6 times too small; "
                       f"pass time_unit='s' (or 'ms', 'us', 'ns' for "
                       f"nanoseconds), or datetime64, or a DatetimeIndex")
        scale = _NS_PER_UNIT[time_unit or "ns"]
        if scale == 1:
            return Times(ints, "int64", None)
        limit = np.iinfo(np.int64).max // scale
        if len(ints) and (ints.max() > limit or ints.min() < -limit):
            raise InvalidInputError(field, f"times in {time_unit} beyond the "
                                           f"int64 ns range")
        return Times(ints * np.int64(scale), "int64", None)
    if kind == "f":
        if values.dtype.itemsize < 8:
            raise InvalidInputError(
                field, f"{values.dtype} cannot hold a timestamp (float32 "
                       f"resolves 128 s near 2024); {_WHAT_TO_SEND}")
        if time_unit is None:
            raise InvalidInputError(
                field, "float64 times have no unit: float seconds "
                       "(index.asi8 / 1e9) read as ns would be 10^9 times "
                       "too small; pass time_unit='s' (or 'ms', 'us', "
                       "'ns'), or int64 ns, datetime64, or a DatetimeIndex")
        seconds_or_unit = values.astype(np.float64, copy=False)
        _check_finite(seconds_or_unit, field, labels)
        if time_unit == "s":
            return Times(seconds_or_unit, "float64", None)
        ns = np.rint(seconds_or_unit * _NS_PER_UNIT[time_unit])
        if np.any(np.abs(ns) >= 2.0**63):
            raise InvalidInputError(field, "times beyond the int64 ns range")
        return Times(ns.astype(np.int64), "int64", None)
    raise InvalidInputError(field, f"dtype {values.dtype} is not a time; "
                                   f"{_WHAT_TO_SEND}")


def _aware(times, field, labels) -> Times:
    ns, zone = _from_pandas_datetimes(times, field, labels)
    return Times(ns, "int64", zone)
