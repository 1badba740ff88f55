"""encode_frame for Dask: a partitioned panel in, a lazy feature frame out.

    import dask.dataframe as dd
    from phasor_client import dask as phasor_dask

    ddf = dd.read_parquet("panel/")            # unique_id, ds, y, ...
    features = phasor_dask.encode_frame(
        ddf, "dns:///phasor-headless.ml.svc.cluster.local:50051",
        time={"dim": 8}, gaps=True)
    features.to_parquet("features/")           # or .compute()

encode_frame takes EncoderClient.encode_frame's arguments (series_column,
time_column, value_columns, channel_column, channels, time_zones, states,
spec/profile/blocks, time_unit, output_dtype) and returns a Dask DataFrame
with the input's index and divisions and one named column per feature. Its
.compute() equals one EncoderClient.encode_frame of the whole frame, byte
for byte, however the frame is partitioned, provided each series' rows in
a later partition are not earlier in time than its rows in an earlier one
(then the server refuses the later partition's first row: see Errors).

Two layouts (partitioned_by):

  "series"  every series lies in one partition (ddf.set_index(series)):
            each partition is one encode_frame call, all in parallel.
            Chosen by default when the frame's index is the series column
            with known divisions (or there is one partition); otherwise
            pass it when you know it holds.
  "time"    a series may span partitions (daily files): partitions are
            encoded in order and each series' SeriesState flows from its
            rows in partition p to its rows in partition p+1, through a
            chain of tasks. The series are hashed into `lanes` independent
            chains, so lane k of partition p+1 runs while lane k+1 of
            partition p does; the default is one lane per worker thread of
            the current dask.distributed Client. Right for any
            partitioning, and the default whenever "series" is not
            certain. A frame without a series column is one series: one
            chain.

Servers (`target`): one gRPC target ("host:port", or
"dns:///name:port" for a Kubernetes headless Service that resolves to every
pod), or a list of "host:port" addresses. Each worker process opens one
round_robin channel to it, on first use, and reuses it for all its tasks
(a module-level cache in _dask_tasks; nothing about a channel is pickled).
round_robin spreads calls, and the pieces of a large partition's call,
over every server, and the channel's default service config retries a call
refused by a replica that is going away. A partition's call that still
fails with UNAVAILABLE or CANCELLED (a replica killed mid-call) is sent
again whole, up to `attempts` times: given its input states it returns the
same bytes, so nothing is lost or doubled. client_options are
EncoderClient keyword arguments (deadline_seconds, tls_*, token_file, ...);
they travel in the task graph, so prefer token_file= to token=.

Eager work when encode_frame is called (everything else waits for
.compute()): one call on the frame's zero-row meta for the output columns,
run through the current Dask scheduler (on a worker when a
dask.distributed Client is active, so only the workers need to reach the
servers). And, only where a whole-frame fact decides what encode_frame
does, one pass over the columns concerned: the long layout's channel
labels when channels= is not given (their sorted set names the columns),
and integer times without time_unit (encode_frame refuses them when every
time lies within a day of the epoch as ns; pass time_unit= to skip it).

Continuing: return_states=True also returns a one-partition Dask Series
{series id: SeriesState} after the frame (FrameResult.states); computed
together with the features (one dask.compute), it is states= of the next
frame.

Errors: what a partition's call raises leaves as a subclass of the class
encode_frame raises (PartitionInputError of InvalidInputError,
PartitionFrameError of FrameError, PartitionError of PhasorError), with
the partition's number as `partition` and its field prefixed
"partitions[p].": "partitions[3].df['ds'][7]" is row 7 of
ddf.partitions[3], and the message is encode_frame's for that partition
alone (so `row` counts rows of the partition; index_label, series_id and
column are the frame's). A series whose rows in a later partition start
before its last time in an earlier one is the server's "decreasing" error
naming that row: the whole frame would have been sorted, a chain cannot.
Errors encode_frame raises before reading rows (a bad spec, a missing
column) are raised by encode_frame here, unchanged.

Thread-safety: encode_frame holds no state; the worker's client cache is
locked.
"""

from __future__ import annotations

import uuid
from typing import Any, Hashable, Mapping, Optional, Sequence, Tuple, Union

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
from dask.highlevelgraph import HighLevelGraph

from . import _dask_tasks as _tasks
from . import frame as _frame
from .client import BlockLike, EnumLike
from .errors import InvalidInputError
from .specs import SpecLike
from .tensors import DTypeLike
from .times import read_times
from ._dask_tasks import (PartitionError, PartitionFrameError,
                          PartitionInputError)

__all__ = ["encode_frame", "PartitionError", "PartitionFrameError",
           "PartitionInputError"]

LAYOUTS = ("series", "time")
# Calls per partition at most (see _dask_tasks.RETRYABLE_CODES): with the
# channel's own 5 attempts each, enough to outlast a replica's restart.
DEFAULT_ATTEMPTS = 4


def encode_frame(ddf: dd.DataFrame, target: Union[str, Sequence[str]], *,
                 series_column: Optional[Hashable] = None,
                 time_column: Optional[Hashable] = None,
                 value_columns: Union[None, Hashable,
                                      Sequence[Hashable]] = None,
                 channel_column: Optional[Hashable] = None,
                 channels: Optional[Sequence[Any]] = None,
                 time_zones: Union[None, str, Mapping[Any, str]] = None,
                 states: Union[None, Mapping[Any, Any], pd.Series] = None,
                 spec: SpecLike = None, profile: Optional[str] = None,
                 time_unit: Optional[str] = None,
                 output_dtype: DTypeLike = "float32",
                 content_block: BlockLike = None, time: BlockLike = None,
                 time2vec: BlockLike = None, gaps: BlockLike = None,
                 calendar: BlockLike = None, combine: EnumLike = None,
                 d_model: Optional[int] = None,
                 partitioned_by: Optional[str] = None,
                 lanes: Optional[int] = None,
                 client_options: Optional[Mapping[str, Any]] = None,
                 attempts: int = DEFAULT_ATTEMPTS,
                 return_states: bool = False
                 ) -> Union[dd.DataFrame, Tuple[dd.DataFrame, dd.Series]]:
    """The features of a Dask DataFrame panel, lazily: a Dask DataFrame
    indexed and divided like `ddf`, one named column per feature, whose
    .compute() equals EncoderClient(target).encode_frame(ddf.compute(),
    ...).frame byte for byte. See the module docstring.

    target: a gRPC target or a list of "host:port" addresses.
    series_column ... d_model: as EncoderClient.encode_frame (states= may
      also be the computed states Series of return_states).
    partitioned_by: "series" (each series in one partition), "time" (a
      series may span partitions, which are in time order), or None:
      "series" when the index is the series column with known divisions
      or there is one partition, else "time".
    lanes: "time" only: independent chains the series are hashed into
      (default: the current dask.distributed Client's worker threads, 1
      without one).
    client_options: EncoderClient keyword arguments for the workers'
      channel (default load_balancing_policy "round_robin").
    attempts: calls per partition at most when a server is unavailable.
    return_states: return (features, states): `states` a one-partition
      Dask Series {series id: SeriesState} after the frame (encode_frame's
      FrameResult.states, for the series the frame holds), for states= of
      the next frame; compute both in one dask.compute, which runs every
      call once.

    Raises what encode_frame raises for the frame's columns and spec now;
    errors about rows when computed (see the module docstring).
    """
    if not isinstance(ddf, dd.DataFrame):
        raise InvalidInputError("ddf", f"expected a dask DataFrame, got "
                                       f"{type(ddf).__name__}")
    targets = _target(target)
    if partitioned_by not in (None,) + LAYOUTS:
        raise InvalidInputError("partitioned_by",
                                f"{partitioned_by!r} is not one of "
                                f"{LAYOUTS!r} or None")
    if attempts < 1:
        raise InvalidInputError("attempts", f"{attempts} is not positive")
    meta = ddf._meta
    # The columns as encode_frame finds them (conventions included).
    series_name, time_name, found_values, _ = _frame._pick_columns(
        meta, series_column, time_column, _frame._as_list(value_columns))

    frame_kwargs = dict(
        series_column=series_column, time_column=time_column,
        value_columns=value_columns, channel_column=channel_column,
        channels=channels, time_zones=time_zones, spec=spec, profile=profile,
        time_unit=time_unit, output_dtype=output_dtype,
        content_block=content_block, time=time, time2vec=time2vec, gaps=gaps,
        calendar=calendar, combine=combine, d_model=d_model)
    frame_kwargs.update(_whole_frame_facts(ddf, frame_kwargs, time_name))

    layout = partitioned_by or _layout(ddf, series_name)
    if layout == "series" and series_name is None and ddf.npartitions > 1:
        raise InvalidInputError(
            "partitioned_by", "without a series column the frame is one "
                              "series, which spans its partitions: "
                              "partitioned_by='time' (or None)")
    if layout == "series":
        lane_count = 1
    elif series_name is None:
        lane_count = 1  # One series, one chain.
    else:
        lane_count = lanes if lanes is not None else _worker_threads()
        if lane_count < 1:
            raise InvalidInputError("lanes", f"{lane_count} is not positive")
    constant_columns = ()
    if series_name is None and layout == "time" and ddf.npartitions > 1:
        constant_columns = tuple(_unencoded_columns(
            meta, time_name, channel_column, found_values))

    settings = _tasks.Settings(
        target=targets,
        client_options=tuple(sorted(
            (name, _hashable(value))
            for name, value in (client_options or {}).items())),
        attempts=attempts, frame_kwargs=frame_kwargs,
        states=(dict(states.items()) if states is not None and len(states)
                else None),
        series_column=series_name,
        lanes=lane_count, constant_columns=constant_columns)

    # The output's columns and dtype: one call on the zero-row meta,
    # wherever the scheduler runs tasks.
    output_meta = dask.compute(dask.delayed(_tasks.probe, pure=False)(
        settings, meta))[0]

    name = f"phasor-encode-frame-{uuid.uuid4().hex}"
    settings_key = f"{name}-settings"
    layer = {settings_key: settings}
    encoded_keys = []  # Each partition's, or each lane's last partition's.
    for p in range(ddf.npartitions):
        part = (ddf._name, p)
        if layout == "series":
            encode_key = (f"{name}-encode", p, 0)
            layer[encode_key] = (_tasks.encode, settings_key, p, part, None,
                                 0, _tasks.FIRST_CARRY)
            layer[(name, p)] = (_tasks.features, encode_key)
            encoded_keys.append(encode_key)
            continue
        positions_key = (f"{name}-lanes", p)
        layer[positions_key] = (_tasks.lane_positions, settings_key, part)
        lane_keys = []
        for k in range(lane_count):
            encode_key = (f"{name}-encode", p, k)
            carry = ((f"{name}-encode", p - 1, k) if p else
                     _tasks.FIRST_CARRY)
            if p:
                carry = (_carry_of, carry)
            layer[encode_key] = (_tasks.encode, settings_key, p, part,
                                 positions_key, k, carry)
            lane_keys.append(encode_key)
        if lane_count == 1:
            layer[(name, p)] = (_tasks.features, lane_keys[0])
        else:
            layer[(name, p)] = (_tasks.assemble, part, positions_key,
                                lane_keys)
    if layout == "time":
        encoded_keys = [(f"{name}-encode", ddf.npartitions - 1, k)
                        for k in range(lane_count)]
    graph = HighLevelGraph.from_collections(name, layer, dependencies=[ddf])
    result = dd.core.new_dd_object(graph, name, output_meta, ddf.divisions)
    if not return_states:
        return result
    # The final states: a one-partition Series in a layer of its own, so
    # that dask.compute(features, states) optimizes both as one dataframe
    # graph and runs every encode task once.
    states_name = f"{name}-states"
    states_graph = HighLevelGraph(
        {**graph.layers, states_name: {
            (states_name, 0): (_tasks.final_states, encoded_keys)}},
        {**graph.dependencies, states_name: {name}})
    states_meta = pd.Series([], dtype=object, name="state")
    return result, dd.core.new_dd_object(states_graph, states_name,
                                         states_meta, (None, None))


def _carry_of(encoded):
    """The carry out of an encode task's result."""
    return encoded[1]


def _target(target):
    """A target string as is, or a list of addresses as a tuple."""
    if isinstance(target, str):
        if not target:
            raise InvalidInputError("target", "empty target")
        return target
    try:
        addresses = tuple(target)
    except TypeError:
        raise InvalidInputError("target", f"expected a gRPC target or a list "
                                          f"of host:port addresses, got "
                                          f"{type(target).__name__}") from None
    if not addresses or not all(isinstance(a, str) and ":" in a
                                for a in addresses):
        raise InvalidInputError("target", f"expected host:port addresses, "
                                          f"got {list(addresses)!r}")
    return addresses


def _layout(ddf, series_name) -> str:
    """partitioned_by when not given: "series" only when it must hold."""
    if ddf.npartitions == 1:
        return "series"
    if (series_name is not None and ddf.known_divisions
            and ddf.index.name == series_name
            and series_name not in ddf.columns):
        # Known divisions put every index value in one partition.
        return "series"
    return "time"


def _worker_threads() -> int:
    """Worker threads of the current dask.distributed Client, 1 without
    one."""
    try:
        from distributed import default_client
        return max(1, sum(default_client().nthreads().values()))
    except (ImportError, ValueError):
        return 1


def _hashable(value):
    """client_options values as cache-key parts (lists to tuples)."""
    if isinstance(value, list):
        return tuple(_hashable(item) for item in value)
    return value


def _unencoded_columns(meta, time_name, channel_column, value_names):
    """The columns encode_frame requires to hold one value when there is
    no series column: neither encoded nor named and not numeric
    (frame._check_unencoded_columns)."""
    roles = {time_name, channel_column, *(value_names or ())} - {None}
    return [name for name in meta.columns if name not in roles
            and not _frame._is_value_dtype(meta[name])]


def _whole_frame_facts(ddf, frame_kwargs, time_name):
    """The encode_frame keywords that depend on the whole frame, read with
    one pass over the columns concerned (none when nothing is needed):
    channels= for the long layout (their order names the columns) and
    time_unit="ns" for integer times no partition may judge alone
    (times.read_times refuses them when all lie within a day of the epoch,
    which one partition may while the frame does not). Raises encode_frame's
    error when the whole frame is refused."""
    meta = ddf._meta
    parts = None
    wanted = {}
    channel_column = frame_kwargs["channel_column"]
    if channel_column is not None and frame_kwargs["channels"] is None:
        parts = ddf.to_delayed()
        wanted["channels"] = [dask.delayed(_tasks.channel_labels)(
            part, channel_column) for part in parts]
    time_dtype = (_frame._column(meta, time_name, "time_column").dtype
                  if time_name is not None else None)
    if (frame_kwargs["time_unit"] is None and time_dtype is not None
            and pd.api.types.is_integer_dtype(time_dtype)):
        parts = parts or ddf.to_delayed()
        wanted["times"] = [dask.delayed(_tasks.time_extent)(part, time_name)
                           for part in parts]
    if not wanted:
        return {}
    found = dict(zip(wanted, dask.compute(*wanted.values())))
    facts = {}
    if "times" in found:
        nonzero = any(extent[0] for extent in found["times"])
        largest = max((extent[1] for extent in found["times"]), default=0.0)
        # The frame's verdict from its largest |t|: read_times on that one
        # value says what it says of the whole column, message included.
        read_times(np.array([int(largest) if nonzero else 0],
                            dtype=time_dtype), f"df[{time_name!r}]", None,
                   refuse_near_epoch_ints=True)
        facts["time_unit"] = "ns"
    if "channels" in found:
        labels = [label for part in found["channels"] for label in part]
        unique = list(dict.fromkeys(labels)) if labels else []
        try:
            facts["channels"] = sorted(unique)
        except TypeError:  # Unorderable labels: first appearance.
            facts["channels"] = unique
    return facts
