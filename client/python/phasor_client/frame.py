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

Times: a datetime64 column or index (naive = UTC), a tz-aware one (its zone
becomes the calendar block's time_zone unless the spec names one or
time_zones= is given), int64 ns, or numbers with time_unit=. NaT is an
InvalidInputError naming the row and its index label.

Continuing: FrameResult.states maps each series id to its SeriesState; pass
it as states= with the next frame of the same series (series missing from it
start afresh). In the long layout with channels, pass channels=
result.channels too, so that channel numbers stay the same.

Thread-safety: encode_frame holds no state of its own; the client it calls
may be shared.
"""

from __future__ import annotations

import collections.abc
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np

try:  # pandas is optional (pyproject's "pandas" extra); encode_frame needs it.
    import pandas as pd
except ImportError:  # pragma: no cover - Debian's python3-pandas is installed
    pd = None

from . import specs
from .errors import InvalidInputError
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
    """(series, time, values, time from the index?) column names after
    finding Nixtla / GluonTS conventions."""
    if time_column is None:
        if isinstance(df.index, pd.DatetimeIndex):
            return series_column, None, value_columns
        for series_name, time_name, value_name in CONVENTIONS:
            if time_name in df.columns:
                time_column = time_name
                if series_column is None and series_name in df.columns:
                    series_column = series_name
                if value_columns is None and value_name in df.columns:
                    value_columns = [value_name]
                break
        else:
            raise InvalidInputError(
                "time_column", "name the time column (or give the frame a "
                               "DatetimeIndex); found none of "
                               f"{[c[1] for c in CONVENTIONS]}")
    return series_column, time_column, value_columns


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
    series_column, time_column, value_columns = _pick_columns(
        df, series_column, time_column, _as_list(value_columns))
    rows = len(df)

    # Times, in input order.
    if time_column is None:
        time_values = df.index
        time_field = "df.index"
    else:
        time_values = _column(df, time_column, "time_column")
        time_field = f"df[{time_column!r}]"
    times = read_times(time_values, time_field, time_unit, labels=df.index)

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
    long_layout = channel_column is not None
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
        if value_columns is None:
            value_columns = [name for name in ("y", "target", "value")
                             if name in df.columns][:1]
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
    panel = client.encode_panel(
        series_ids=sorted_codes, spec=config, profile=profile,
        time_zones=zone_names if series_ids else None,
        time_zone_index=zone_index if series_ids else None,
        states=state_list, output_dtype=output_dtype,
        channel_names=[str(c) for c in channels] or None,
        time_unit=time_unit_sent, **panel_arrays)

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
