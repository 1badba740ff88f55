"""encode_frame: a pandas panel DataFrame in, one named column per feature out.

Two layouts, told apart by `channel_column`:

  long   one row per observation: a series id, a time, a value and,
         optionally, a channel label (then every row is one event of the
         long (time, channel, value) layout, SeFT/STraTS-style, and gets one
         output row). Nixtla's `unique_id`/`ds`/`y` and GluonTS's
         `item_id`/`timestamp`/`target` are this layout without a channel:
         name the columns (series_column="unique_id", time_column="ds",
         value_columns="y"), or leave them out and the client finds those
         two conventions by their column names.
  wide   one row per time, one column per channel (value_columns, by
         default every numeric column that is neither the series nor the
         time), NaN = not observed; the time is a column or the
         DatetimeIndex; the series column is optional (one series without).

Row order: rows of a series need not be contiguous or sorted. The client
sorts stably by (series, time) — series in order of first appearance, rows
with equal times in input order (that order matters to gaps and
last_value: among rows at one instant the later row's value wins) — encodes
the panel in one encode_panel call (cut under the message limit as that
method does), and returns the features in the INPUT's row order, indexed by
the input's index.

Columns left out: nothing a frame holds is dropped where dropping it may
change the result; each case below is an InvalidInputError naming the
columns and the argument that settles it.

  * Without a series column (none named, none found by convention) every
    row is one series. A column that is neither encoded nor named — a
    string `station`, a bool, a second datetime — or a named MultiIndex
    level may be the series id, whose rows would be interleaved in time:
    it is an error unless it holds one value throughout (either reading
    then gives the same series). series_column= settles it; value_columns=
    does not (it says which columns are values, not which rows are one
    series); otherwise drop the column.
  * When the value column was found by name (Nixtla's `y`, GluonTS's
    `target`, the channel layout's `y`/`target`/`value`), a further numeric
    column (`price`) is an error: value_columns=["y", "price"] encodes it
    as a channel, value_columns=["y"] leaves it out.
  * Once columns are named, the rest is deliberate: with series_column
    given, other non-numeric columns are not encoded; with value_columns
    given, other numeric columns are not.

Times: a datetime64 column or index (naive = UTC), a tz-aware one (its zone
becomes the calendar block's time_zone unless the spec names one or
time_zones= is given), int64 ns, or numbers with time_unit=. Integers
without time_unit that all lie within one day of the epoch when read as ns
(1704096000: seconds; 1.7e12: milliseconds) are an InvalidInputError asking
for time_unit=, as float times are; all-zero times are read (0 is the same
instant in every unit). NaT is an InvalidInputError naming the row and its
index label.

Server errors: the server numbers what it refuses in the panel sent (series
in order of first appearance, rows sorted by time:
"observations.series[3].values[5]"). encode_frame maps that path's
segments back and raises errors.FrameError, a PhasorError naming the
series id, index label, row and column in its message, in its one field
violation ("df['temp'][7]") and as attributes; errors about no row of the
frame (a spec) are raised as they came.

Continuing: FrameResult.states maps each series id to its SeriesState; pass
it as states= with the next frame of the same series (series missing from it
start afresh). In the long layout with channels, pass channels=
result.channels too, so that channel numbers stay the same.

Thread-safety: encode_frame holds no state of its own; the client it calls
may be shared.
"""

from __future__ import annotations

import collections
import collections.abc
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np

try:  # pandas is optional (pyproject's "pandas" extra); encode_frame needs it.
    import pandas as pd
except ImportError:  # pragma: no cover - Debian's python3-pandas is installed
    pd = None

from . import specs
from .errors import (FrameError, InvalidInputError, PhasorError,
                     format_field_path, parse_field_path)
from .schema import feature_names
from .times import read_times

# Column conventions found when no column is named: (series, time, value).
CONVENTIONS = (("unique_id", "ds", "y"),          # Nixtla
               ("item_id", "timestamp", "target"))  # GluonTS


class FrameResult:
    """What encode_frame returns.

    frame: DataFrame [rows, F] of the output dtype (float32 by default,
      float64 when asked; float16 as is, bf16 widened to float32),
      one named column per feature (schema.feature_names), indexed like
      the input, in the input's row order.
    states: {series id: SeriesState} after this frame, for states= of the
      next call (the key is None for a frame without a series column).
    schema: the response's SchemaEntry list.
    channels: the channel labels in channel order (value columns, or the
      long layout's channel labels).
    """

    def __init__(self, frame: pd.DataFrame, states: Dict[Any, Any],
                 schema: List[Any], channels: List[Any]) -> None:
        """Holds encode_frame's results (see the class docstring)."""
        self.frame = frame
        self.states = states
        self.schema = schema
        self.channels = channels

    def __repr__(self) -> str:
        return (f"FrameResult(frame={self.frame.shape[0]}x"
                f"{self.frame.shape[1]}, series={len(self.states)}, "
                f"channels={self.channels!r})")


def apply_data_zone(config, zone: Optional[str]):
    """config (an EncoderSpec or None) with `zone` as the calendar block's
    time zone when the data is tz-aware and the spec names none; a copy
    when changed."""
    if zone is None or config is None or not config.HasField("temporal"):
        return config
    temporal = config.temporal
    if not temporal.HasField("calendar") or temporal.calendar.time_zone:
        return config
    out = type(config)()
    out.CopyFrom(config)
    out.temporal.calendar.time_zone = zone
    return out


def _column(df: pd.DataFrame, name: Any, what: str) -> pd.Series:
    """A column or an index level of df, as a Series aligned with its rows."""
    if name in df.columns:
        return df[name]
    if name in (df.index.names or ()):
        values = df.index.get_level_values(name)
        return pd.Series(values, index=df.index, name=name)
    raise InvalidInputError(what, f"no column or index level {name!r}; "
                                  f"columns: {list(df.columns)}")


def _pick_columns(df, series_column, time_column, value_columns):
    """(series, time, values, values found by name?) column names after
    finding Nixtla / GluonTS conventions; time None = the DatetimeIndex."""
    if time_column is None:
        if isinstance(df.index, pd.DatetimeIndex):
            return series_column, None, value_columns, False
        for series_name, time_name, value_name in CONVENTIONS:
            if time_name in df.columns:
                time_column = time_name
                if series_column is None and series_name in df.columns:
                    series_column = series_name
                if value_columns is None and value_name in df.columns:
                    return series_column, time_column, [value_name], True
                break
        else:
            raise InvalidInputError(
                "time_column", "name the time column (or give the frame a "
                               "DatetimeIndex); found none of "
                               f"{[c[1] for c in CONVENTIONS]}")
    return series_column, time_column, value_columns, False


def _is_value_dtype(column) -> bool:
    """Whether a column is encoded by default: numeric, not boolean."""
    return (pd.api.types.is_numeric_dtype(column)
            and not pd.api.types.is_bool_dtype(column))


def _varies(values) -> bool:
    """Whether a column or index level holds more than one distinct value
    (NA counting as one); unhashable values count as varying."""
    try:
        return pd.Series(values).nunique(dropna=False) > 1
    except TypeError:
        return len(values) > 1


def _check_unencoded_columns(df, series_column, time_column, channel_column,
                             value_columns, values_found, long_layout):
    """InvalidInputError for a column the layout would leave out silently
    where that may change the result.

    Without a series column, every row belongs to one series, so a column
    that is neither encoded nor named (a string `station`, a bool, a second
    datetime) may be the forgotten series id: its rows would be interleaved
    in time. Such a column (or a named MultiIndex level) is an error unless
    it holds one value throughout (then either reading gives the same
    series). Naming series_column settles it; value_columns= does not,
    since it says which columns are values, not which rows are one series.

    With the value column found by name (Nixtla's y, GluonTS's target, or
    the long layout's y/target/value), a further numeric column is an error
    too: pass value_columns= to encode it or to leave it out, or drop it.
    """
    roles = {series_column, time_column, channel_column,
             *(value_columns or ())} - {None}
    if series_column is None:
        columns = [name for name in df.columns if name not in roles
                   and not _is_value_dtype(df[name]) and _varies(df[name])]
        levels = ([name for name in df.index.names if name is not None
                   and name not in roles
                   and _varies(df.index.get_level_values(name))]
                  if isinstance(df.index, pd.MultiIndex) else [])
        if columns or levels:
            name = (columns or levels)[0]
            what = (f"column {name!r} ({df[name].dtype})" if columns else
                    f"index level {name!r}")
            others = [other for other in columns + levels if other != name]
            drop = (f"df.drop(columns={columns!r})" if columns else
                    f"df.reset_index(level={levels!r}, drop=True)")
            raise InvalidInputError(
                "series_column",
                f"{what} is neither encoded nor named"
                f"{f' (nor are {others!r})' if others else ''}, and "
                f"without series_column every row is one series: rows of "
                f"different {name!r} would be interleaved in time. If it "
                f"identifies the series, pass series_column={name!r}; if "
                f"not, drop it ({drop})")
    if values_found:
        extra = [name for name in df.columns
                 if name not in roles and _is_value_dtype(df[name])]
        if extra:
            if long_layout:
                settle = (f"value_columns={value_columns!r} to leave them "
                          f"out (the long layout with channel_column takes "
                          f"one value column)" if value_columns else
                          f"value_columns={extra[0]!r} for the events' "
                          f"values")
            else:
                settle = (f"value_columns={value_columns + extra!r} to "
                          f"encode them as channels, "
                          f"value_columns={value_columns!r} to leave them "
                          f"out")
            found = (f"the value column {value_columns[0]!r} was found by "
                     f"name" if value_columns else
                     "no value column was named or found by name (y, "
                     "target, value)")
            raise InvalidInputError(
                "value_columns",
                f"numeric columns {extra!r} are not encoded: {found}; "
                f"pass {settle}, or drop them")


def _as_list(names) -> Optional[List[Any]]:
    if names is None:
        return None
    if isinstance(names, str) or not isinstance(names, collections.abc.Iterable):
        return [names]
    return list(names)


def encode_frame(client, df: pd.DataFrame, *, series_column=None,
                 time_column=None, value_columns=None, channel_column=None,
                 channels: Optional[Sequence[Any]] = None,
                 time_zones: Union[None, str, Mapping[Any, str]] = None,
                 states: Optional[Mapping[Any, Any]] = None,
                 spec=None, profile: Optional[str] = None,
                 time_unit: Optional[str] = None,
                 output_dtype="float32", blocks: Mapping[str, Any] = None
                 ) -> FrameResult:
    """See EncoderClient.encode_frame and the module docstring."""
    if pd is None:
        raise InvalidInputError("df", "encode_frame needs pandas: install "
                                "python3-pandas (Debian) or the package's "
                                "'pandas' extra")
    if not isinstance(df, pd.DataFrame):
        raise InvalidInputError("df", f"expected a pandas DataFrame, got "
                                      f"{type(df).__name__}")
    series_column, time_column, value_columns, values_found = _pick_columns(
        df, series_column, time_column, _as_list(value_columns))
    long_layout = channel_column is not None
    if long_layout and value_columns is None:
        value_columns = [name for name in ("y", "target", "value")
                         if name in df.columns][:1]
        values_found = True
    rows = len(df)

    # Times, in input order.
    if time_column is None:
        time_values = df.index
        time_field = "df.index"
    else:
        time_values = _column(df, time_column, "time_column")
        time_field = f"df[{time_column!r}]"
    # A frame's integer times within a day of the epoch are seconds or
    # milliseconds, not ns: refused without time_unit (times.py).
    times = read_times(time_values, time_field, time_unit, labels=df.index,
                       refuse_near_epoch_ints=True)

    # Series codes in order of first appearance.
    if series_column is None:
        codes = np.zeros(rows, dtype=np.int64)
        series_ids: List[Any] = [None] if rows else []
    else:
        series = _column(df, series_column, "series_column")
        codes, uniques = pd.factorize(series, sort=False)
        missing = np.flatnonzero(codes < 0)
        if len(missing):
            row = int(missing[0])
            raise InvalidInputError(
                f"df[{series_column!r}][{row}]",
                f"no series id at row {row} (index label "
                f"{df.index[row]!r})")
        series_ids = list(uniques)
        codes = codes.astype(np.int64)

    # Stable: ties in time keep the input's order.
    order = np.lexsort((times.array, codes))
    sorted_codes = codes[order]
    sorted_times = times.array[order]

    used = {series_column, time_column, channel_column} - {None}
    if long_layout:
        labels = _column(df, channel_column, "channel_column")
        if channels is None:
            found = pd.unique(labels.dropna())
            try:
                channels = sorted(found)
            except TypeError:  # Unorderable labels: first appearance.
                channels = list(found)
        channels = list(channels)
        lookup = {label: index for index, label in enumerate(channels)}
        channel_codes = np.fromiter(
            (lookup.get(label, -1) for label in labels.to_numpy()),
            dtype=np.int64, count=rows)
        unknown = np.flatnonzero(channel_codes < 0)
        if len(unknown):
            row = int(unknown[0])
            raise InvalidInputError(
                f"df[{channel_column!r}][{row}]",
                f"channel {labels.iloc[row]!r} at row {row} (index label "
                f"{df.index[row]!r}) is not one of channels={channels!r}")
        if len(value_columns) > 1:
            raise InvalidInputError(
                "value_columns", f"the long layout takes one value column, "
                                 f"got {value_columns}")
        event_values = (_numeric(df, value_columns[0])[order]
                        if value_columns else None)
        panel_arrays = dict(event_times=sorted_times,
                            event_channels=channel_codes[order].astype(np.int32),
                            event_values=event_values,
                            num_channels=len(channels))
    else:
        if value_columns is None:
            value_columns = [name for name in df.columns if name not in used
                             and pd.api.types.is_numeric_dtype(df[name])
                             and not pd.api.types.is_bool_dtype(df[name])]
        channels = list(value_columns)
        values = (np.stack([_numeric(df, name) for name in value_columns],
                           axis=1)[order] if value_columns else None)
        panel_arrays = dict(timestamps=sorted_times, values=values)

    # After the rows' own checks (times, series ids, channel labels), which
    # name a row and so are the more specific errors.
    _check_unencoded_columns(df, series_column, time_column, channel_column,
                             value_columns, values_found, long_layout)

    # Spec and zones.
    config = specs.temporal_config(spec, profile, blocks or {})
    zone_names = zone_index = None
    if isinstance(time_zones, str):
        zone_names = [time_zones]
    elif time_zones is not None:
        names: List[str] = []
        zone_index = np.empty(len(series_ids), dtype=np.int32)
        for index, key in enumerate(series_ids):
            if key not in time_zones:
                raise InvalidInputError(
                    "time_zones", f"no zone for series {key!r}")
            if time_zones[key] not in names:
                names.append(time_zones[key])
            zone_index[index] = names.index(time_zones[key])
        zone_names = names
    else:
        config = apply_data_zone(config, times.time_zone)
    state_list = None
    if states:
        state_list = [states.get(key) for key in series_ids]

    time_unit_sent = "s" if times.wire_dtype == "float64" else None
    try:
        panel = client.encode_panel(
            series_ids=sorted_codes, spec=config, profile=profile,
            time_zones=zone_names if series_ids else None,
            time_zone_index=zone_index if series_ids else None,
            states=state_list, output_dtype=output_dtype,
            channel_names=[str(c) for c in channels] or None,
            time_unit=time_unit_sent, **panel_arrays)
    except PhasorError as error:
        if isinstance(error, InvalidInputError):
            raise
        places = _Places(
            df=df, order=order,
            offsets=np.searchsorted(sorted_codes,
                                    np.arange(len(series_ids) + 1)),
            series_ids=series_ids, series_column=series_column,
            time_column=time_column, value_columns=list(value_columns or ()),
            channel_column=channel_column, channels=channels)
        raise _frame_error(error, places) from None

    features = np.asarray(panel.features)
    unsorted = np.empty_like(features)
    unsorted[order] = features
    names = feature_names(panel.schema, [str(c) for c in channels])
    frame = pd.DataFrame(unsorted, index=df.index, columns=names)
    return FrameResult(frame, dict(zip(series_ids, panel.states)),
                       list(panel.schema), channels)


def _numeric(df: pd.DataFrame, name: Any) -> np.ndarray:
    """A value column as float64, NA = NaN."""
    column = _column(df, name, "value_columns")
    if not (pd.api.types.is_numeric_dtype(column)
            or pd.api.types.is_bool_dtype(column)):
        raise InvalidInputError(f"df[{name!r}]", f"values must be numeric, "
                                                 f"got dtype {column.dtype}")
    return column.astype("float64").to_numpy()


# What maps the panel encode_frame sent back to the frame: `order` [rows]
# the frame row of each panel row, `offsets` [S+1] each series' panel rows,
# and the columns in their roles (time_column None = the index;
# value_columns the wide layout's channels, or the long layout's one value
# column).
_Places = collections.namedtuple("_Places", [
    "df", "order", "offsets", "series_ids", "series_column", "time_column",
    "value_columns", "channel_column", "channels"])


def _frame_error(error: PhasorError, places: _Places) -> PhasorError:
    """The server's error about the panel sent, placed in the frame: a
    FrameError naming the series id, index label, row and column, or
    `error` itself when its field path is not one of the frame's (a spec
    error, say).

    Works on the BadRequest field path as data: its segments are mapped
    (series index → series id, row within the series → frame row, element
    → channel column); the server's message is quoted, never rewritten.
    """
    violations = error.field_violations()
    if not violations:
        return error
    wire_field = violations[0][0]
    place = _locate(parse_field_path(wire_field), places)
    if place is None:
        return error
    field, words, series_index, row, column = place
    series_id = (places.series_ids[series_index]
                 if series_index is not None else None)
    label = places.df.index[row] if row is not None else None
    if series_index is not None and places.series_column is not None:
        words.insert(0, f"series {series_id!r}")
    description = (f"{', '.join(words)}; the server's message, numbering "
                   f"the panel sent (series in order of first appearance, "
                   f"each sorted by time): {error.details()}")
    return FrameError(error.code(), f"{field}: {description}",
                      [(field, description)], error.rpc_error,
                      series_id=series_id, index_label=label, row=row,
                      column=column, wire_field=wire_field)


def _locate(segments, places: _Places):
    """(field, words, series index, frame row, column) for a field path's
    segments in the panel sent, or None when the path is not about the
    frame's rows, states or zones. `words` describe the place in the
    frame's terms; the caller puts the series id first."""
    num_series = len(places.series_ids)
    if (len(segments) >= 2 and segments[0] == ("observations", None)
            and segments[1][0] == "time_zone_index"
            and segments[1][1] is not None and segments[1][1] < num_series):
        series = segments[1][1]
        return (f"time_zones[{places.series_ids[series]!r}]",
                ["the zone given in time_zones="], series, None, None)
    if segments and segments[0][0] == "states" and \
            segments[0][1] is not None and segments[0][1] < num_series:
        series = segments[0][1]
        rest = segments[1:]
        field = f"states[{places.series_ids[series]!r}]" + (
            "." + format_field_path(rest) if rest else "")
        column = None
        if rest and rest[0][0] == "channels" and rest[0][1] is not None \
                and rest[0][1] < len(places.channels):
            column = places.channels[rest[0][1]]
        words = ["the SeriesState given in states="] + (
            [f"channel {column!r}"] if column is not None else [])
        return field, words, series, None, column
    if not (len(segments) >= 3 and segments[0] == ("observations", None)
            and segments[1][0] == "series" and segments[1][1] is not None
            and segments[1][1] < num_series and segments[2][1] is not None):
        return None
    series, (name, index) = segments[1][1], segments[2]
    within = index
    long_layout = places.channel_column is not None
    width = len(places.value_columns)
    if name in ("timestamps", "event_times"):
        column = places.time_column
    elif name in ("values", "mask") and not long_layout and width:
        within, channel = divmod(index, width)
        column = places.value_columns[channel]
    elif name == "event_channels" and long_layout:
        column = places.channel_column
    elif name == "event_values" and long_layout and width:
        column = places.value_columns[0]
    else:
        return None
    begin, end = places.offsets[series], places.offsets[series + 1]
    if within >= end - begin:
        return None
    row = int(places.order[begin + within])
    words = [f"row {row} (index label {places.df.index[row]!r})"]
    if column is None:
        field = f"df.index[{row}]"
        words.append("the index's time")
    elif column in places.df.columns:
        field = f"df[{column!r}][{row}]"
        words.append(f"column {column!r}")
    else:  # An index level named as a role.
        field = f"df.index.get_level_values({column!r})[{row}]"
        words.append(f"index level {column!r}")
    if long_layout and column != places.channel_column:
        label = _column(places.df, places.channel_column,
                        "channel_column").iloc[row]
        words.append(f"channel {label!r}")
    return field, words, series, row, column
