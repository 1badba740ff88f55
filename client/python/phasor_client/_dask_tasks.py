"""The task functions behind phasor_client.dask: what runs on a Dask worker.

Every function here is a plain function of picklable arguments (a Settings,
pandas partitions, dicts of SeriesState), so that a Dask graph can name it
and any worker process can run it; no gRPC object is ever pickled. The one
channel a worker process uses lives in this module's client cache.

Tasks, for partition p of the input and lane k (dask.py builds the graph):

  lane_positions(settings, part)        [K] int64 arrays: the rows of each
                                        lane (series hashed into K lanes)
  encode(settings, p, part, positions, k, carry)
                                        (features DataFrame, Carry): one
                                        encode_frame call on the lane's rows
                                        with the carried SeriesStates
  assemble(part, positions, encoded)    the partition's features from its
                                        lanes', in input order
  final_states(encoded)                 {series id: SeriesState} (a Series)
  probe(settings, meta)                 the output's empty frame (columns)
  channel_labels, time_extent           a partition's part of a fact about
                                        the whole frame (dask.py)

Client cache: one EncoderClient per (target, options) per worker process,
made on first use and shared by the worker's threads (an EncoderClient may
be shared, client.py); a process forked after one was made starts its own.

Errors: a call that fails with UNAVAILABLE or CANCELLED (a replica stopped
or gone) after the channel's own retries is sent again whole, up to
Settings.attempts times: a partition's call depends only on its rows and
input states, so a repeat gives the same bytes and nothing is lost or
doubled. Any other PhasorError leaves as a Partition*Error naming the
partition (see PartitionError), numbered as encode_frame numbers the
partition's own rows.

Thread-safety: the cache is guarded by a lock; the tasks hold no state.
"""

from __future__ import annotations

import collections
import copyreg
import logging
import os
import socket
import threading
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import grpc
import numpy as np
import pandas as pd

from . import frame as _frame
from .client import EncoderClient, pb
from .errors import FrameError, InvalidInputError, PhasorError

# Codes after which a partition's call is repeated: the same two the
# channel's default service config retries (client.DEFAULT_SERVICE_CONFIG),
# seen here when a replica dies after a call was committed to it (gRPC does
# not retry a call once response headers arrived, gRFC A6).
RETRYABLE_CODES = frozenset((grpc.StatusCode.UNAVAILABLE,
                             grpc.StatusCode.CANCELLED))
# Each repeat is logged here at WARNING (a replica lost mid-call).
LOGGER = logging.getLogger("phasor_client.dask")
# Pause before repeat i (0-based): FIRST_BACKOFF_SECONDS · 2^i, at most
# MAX_BACKOFF_SECONDS; round_robin takes a dead replica out of the pick
# list within a connection attempt, well inside the first pause.
FIRST_BACKOFF_SECONDS = 0.2
MAX_BACKOFF_SECONDS = 3.2


def _state_from_bytes(data: bytes) -> pb.SeriesState:
    """A SeriesState from its wire bytes (the unpickler of one)."""
    return pb.SeriesState.FromString(data)


def _reduce_state(state: pb.SeriesState):
    return _state_from_bytes, (state.SerializeToString(),)


# SeriesStates cross processes (a chain's carry, the caller's states=, the
# final states): pickled as their wire bytes. The generated class names a
# module ("phasor.v1.encoder_pb2") that is not importable under that name
# (the stubs live in phasor_client._proto), so pickle's own by-reference
# form fails; copyreg's table is what pickle and cloudpickle consult first.
copyreg.pickle(pb.SeriesState, _reduce_state)


class Settings:
    """What every task of one dask.encode_frame needs; picklable, and put
    in the graph once (each worker unpickles it once).

    target: one gRPC target string, or a tuple of "host:port" addresses
      (one round_robin channel over all of them).
    client_options: EncoderClient keyword arguments, as a sorted tuple of
      (name, value) pairs (hashable: the client cache's key).
    attempts: calls per partition at most (1 = no repeat).
    frame_kwargs: EncoderClient.encode_frame's keywords but `states`.
    states: the caller's states= (None or a mapping), the first partitions'
      input.
    series_column: the series column found as encode_frame finds it (None:
      the frame is one series).
    lanes: K, the number of independent chains the series are hashed into.
    constant_columns: without a series column, the columns that must hold
      one value throughout (encode_frame checks that within a partition;
      the chain checks it across partitions).
    """

    def __init__(self, target, client_options, attempts, frame_kwargs,
                 states, series_column, lanes, constant_columns) -> None:
        """See the class docstring."""
        self.target = target
        self.client_options = client_options
        self.attempts = attempts
        self.frame_kwargs = frame_kwargs
        self.states = states
        self.series_column = series_column
        self.lanes = lanes
        self.constant_columns = constant_columns


# -- the worker's channel ---------------------------------------------------

_clients: Dict[Any, EncoderClient] = {}
_clients_lock = threading.Lock()
_clients_pid = os.getpid()


def channel_target(target) -> str:
    """The gRPC target for a target string (as is) or a list of
    "host:port" addresses: "ipv4:a:p,b:q" (or "ipv6:[a]:p,..."), the
    static-list form of gRPC's naming doc (doc/naming.md), names resolved
    now to every address they have."""
    if isinstance(target, str):
        return target
    if len(target) == 1:
        return target[0]
    ipv4: List[str] = []
    ipv6: List[str] = []
    for address in target:
        host, _, port = address.rpartition(":")
        host = host[1:-1] if host.startswith("[") else host
        for family, _, _, _, sockaddr in socket.getaddrinfo(
                host, int(port), type=socket.SOCK_STREAM):
            if family == socket.AF_INET:
                text = f"{sockaddr[0]}:{sockaddr[1]}"
                if text not in ipv4:
                    ipv4.append(text)
            elif family == socket.AF_INET6:
                text = f"[{sockaddr[0]}]:{sockaddr[1]}"
                if text not in ipv6:
                    ipv6.append(text)
    # One scheme per target: IPv4 when any address has one.
    return "ipv4:" + ",".join(ipv4) if ipv4 else "ipv6:" + ",".join(ipv6)


def client_for(settings: Settings) -> EncoderClient:
    """This process's EncoderClient for the settings' target and options,
    made on first use. round_robin unless the options name a policy: a
    list or a DNS name then spreads calls (and a split panel's pieces)
    over every server, and a dead one leaves the pick list."""
    global _clients_pid
    key = (settings.target, settings.client_options)
    with _clients_lock:
        if _clients_pid != os.getpid():  # Forked: the parent's channels
            _clients.clear()             # are not usable here.
            _clients_pid = os.getpid()
        client = _clients.get(key)
        if client is None:
            options = dict(settings.client_options)
            options.setdefault("load_balancing_policy", "round_robin")
            client = EncoderClient(channel_target(settings.target),
                                   **options)
            _clients[key] = client
        return client


def _call(settings: Settings, what: str, frame: pd.DataFrame,
          states: Optional[Mapping[Any, Any]]) -> _frame.FrameResult:
    """client.encode_frame(frame), repeated whole after UNAVAILABLE or
    CANCELLED (see the module docstring); `what` names the call in the
    log ("partition 3")."""
    client = client_for(settings)
    attempt = 0
    while True:
        try:
            return client.encode_frame(frame, states=states,
                                       **settings.frame_kwargs)
        except PhasorError as error:
            attempt += 1
            if (error.code() not in RETRYABLE_CODES
                    or attempt >= settings.attempts):
                raise
            pause = min(MAX_BACKOFF_SECONDS,
                        FIRST_BACKOFF_SECONDS * 2 ** (attempt - 1))
            LOGGER.warning("%s: call %d of %d failed (%s: %s); calling "
                           "again in %.1f s", what, attempt,
                           settings.attempts, error.code().name,
                           error.details(), pause)
        time.sleep(pause)


# -- errors that cross the wire -----------------------------------------------

class _CallRecord(grpc.RpcError, grpc.Call):
    """The picklable part of a failed call (code, message, metadata), kept
    as a Partition*Error's rpc_error: gRPC's own error holds a C object and
    does not survive a trip from the worker to the caller."""

    def __init__(self, code: grpc.StatusCode, message: str,
                 trailing: Sequence[Tuple[str, Any]], debug: str) -> None:
        """code, details(), trailing_metadata(), debug_error_string()."""
        super().__init__(message)
        self._code, self._message = code, message
        self._trailing, self._debug = tuple(trailing or ()), debug

    @classmethod
    def of(cls, error: Optional[grpc.RpcError]) -> Optional[_CallRecord]:
        """The record of a grpc.RpcError (None for None)."""
        if error is None or isinstance(error, _CallRecord):
            return error
        def read(name, default):
            method = getattr(error, name, None)
            try:
                return method() if method is not None else default
            except Exception:  # noqa: BLE001 - a detail we can do without
                return default
        return cls(read("code", grpc.StatusCode.UNKNOWN),
                   read("details", str(error)),
                   read("trailing_metadata", ()),
                   read("debug_error_string", ""))

    def __reduce__(self):
        return (_CallRecord, (self._code, self._message, self._trailing,
                              self._debug))

    def code(self) -> grpc.StatusCode:
        """The call's status code."""
        return self._code

    def details(self) -> str:
        """The call's status message."""
        return self._message

    def trailing_metadata(self) -> Tuple[Tuple[str, Any], ...]:
        """The call's trailing metadata (the BadRequest detail)."""
        return self._trailing

    def initial_metadata(self) -> Tuple[()]:
        """(): not kept."""
        return ()

    def debug_error_string(self) -> str:
        """gRPC's debug string for the call."""
        return self._debug

    def is_active(self) -> bool:
        """False: the call has ended."""
        return False

    def time_remaining(self) -> None:
        """None: an ended call has no deadline left."""
        return None

    def cancel(self) -> bool:
        """False: an ended call cannot be cancelled."""
        return False

    def add_callback(self, callback: Any) -> bool:
        """False: the call has ended."""
        return False


class PartitionError(PhasorError):
    """A PhasorError from one partition's call that names no row (the
    server unreachable after every repeat, a deadline): the call's code,
    message and violations, plus `partition`, the partition's number."""

    def __init__(self, code: grpc.StatusCode, message: str,
                 violations: Sequence[Tuple[str, str]],
                 rpc_error: Optional[grpc.RpcError], partition: int) -> None:
        """PhasorError's arguments and the partition number."""
        super().__init__(code, message, violations, _CallRecord.of(rpc_error))
        self.partition = partition

    def __reduce__(self):
        return (PartitionError, (self.code(), self.details(),
                                 self.field_violations(), self.rpc_error,
                                 self.partition))


class PartitionInputError(InvalidInputError):
    """encode_frame's InvalidInputError for a partition's rows: the field
    is "partitions[p]." + the field encode_frame named for the partition
    alone ("partitions[3].df['ds'][7]": row 7 of ddf.partitions[3]), the
    description is encode_frame's."""

    def __init__(self, field: str, description: str,
                 partition: int) -> None:
        """InvalidInputError's arguments and the partition number."""
        super().__init__(field, description)
        self.partition = partition

    def __reduce__(self):
        (field, description), = self.field_violations()
        return (PartitionInputError, (field, description, self.partition))


class PartitionFrameError(FrameError):
    """encode_frame's FrameError for a partition's rows: the field is
    "partitions[p]." + the partition's own field; series_id, index_label,
    column and wire_field as FrameError's, `row` the row's position in the
    partition, `partition` its number."""

    def __init__(self, code: grpc.StatusCode, message: str,
                 violations: Sequence[Tuple[str, str]],
                 rpc_error: Optional[grpc.RpcError], *, series_id: Any,
                 index_label: Any, row: Optional[int], column: Any,
                 wire_field: str, partition: int) -> None:
        """FrameError's arguments and the partition number."""
        super().__init__(code, message, violations,
                         _CallRecord.of(rpc_error), series_id=series_id,
                         index_label=index_label, row=row, column=column,
                         wire_field=wire_field)
        self.partition = partition

    def __reduce__(self):
        return (_frame_error_again, (
            self.code(), self.details(), self.field_violations(),
            self.rpc_error, self.series_id, self.index_label, self.row,
            self.column, self.wire_field, self.partition))


def _frame_error_again(code, message, violations, rpc_error, series_id,
                       index_label, row, column, wire_field, partition):
    """PartitionFrameError's unpickler (its keyword-only arguments)."""
    return PartitionFrameError(code, message, violations, rpc_error,
                               series_id=series_id, index_label=index_label,
                               row=row, column=column, wire_field=wire_field,
                               partition=partition)


def in_partition(error: PhasorError, partition: int) -> PhasorError:
    """The error of partition `partition`'s call as a Partition*Error: one
    violation (field, description) becomes ("partitions[p]." + field,
    description) and the message is built from them as encode_frame builds
    it; the message is not read or rewritten."""
    violations = error.field_violations()
    if len(violations) != 1:
        return PartitionError(error.code(), error.details(), violations,
                              error.rpc_error, partition)
    field, description = violations[0]
    field = f"partitions[{partition}].{field}"
    if isinstance(error, FrameError):
        return PartitionFrameError(
            error.code(), f"{field}: {description}", [(field, description)],
            error.rpc_error, series_id=error.series_id,
            index_label=error.index_label, row=error.row,
            column=error.column, wire_field=error.wire_field,
            partition=partition)
    if isinstance(error, InvalidInputError):
        return PartitionInputError(field, description, partition)
    return PartitionError(error.code(), f"{field}: {description}",
                          [(field, description)], error.rpc_error, partition)


# -- lanes and the carried states ------------------------------------------

Carry = collections.namedtuple("Carry", ["states", "constants"])
Carry.__doc__ = """What flows from a lane's task for partition p to its task
for p+1: `states` {series id: SeriesState} of every series the lane has
encoded so far (the caller's states= are read beneath it, see
call_states), and, for a frame without a series column, `constants`
{column: value}: each constant column's value in the partitions so far
(None: no row seen yet)."""

FIRST_CARRY = Carry({}, None)


def call_states(settings: Settings, carry: Carry) -> Optional[Mapping]:
    """The states= of a call: the carried ones over the caller's."""
    if not settings.states:
        return carry.states
    if not carry.states:
        return settings.states
    return collections.ChainMap(carry.states, settings.states)


def lane_positions(settings: Settings,
                   part: pd.DataFrame) -> Optional[List[np.ndarray]]:
    """The rows of each of the K lanes (None for K = 1): series ids hashed
    with pandas' hash_pandas_object, which is the same function of the
    value in every process and every partition (siphash with a fixed key,
    categorical columns hashed by value)."""
    if settings.lanes == 1:
        return None
    ids = _frame._column(part, settings.series_column, "series_column")
    hashes = pd.util.hash_pandas_object(ids, index=False).to_numpy()
    lane = hashes % np.uint64(settings.lanes)
    return [np.flatnonzero(lane == k) for k in range(settings.lanes)]


def _check_constants(settings: Settings, partition: int,
                     part: pd.DataFrame, carried):
    """{column: value} for the frame without a series column after this
    partition; InvalidInputError when a column that must hold one value
    (encode_frame checks it within the partition) holds another here than
    in an earlier partition: its rows would be joined into one series."""
    if not settings.constant_columns or not len(part):
        return carried
    here = {name: part[name].iloc[0] for name in settings.constant_columns}
    if carried is None:
        return here
    for name, value in here.items():
        if not _same(carried[name], value):
            raise InvalidInputError(
                "series_column",
                f"column {name!r} ({part[name].dtype}) is neither encoded "
                f"nor named and holds {carried[name]!r} in earlier "
                f"partitions and {value!r} in partition {partition}; "
                f"without series_column every row is one series, so rows "
                f"of different {name!r} would be joined into one. If it "
                f"identifies the series, pass series_column={name!r}; if "
                f"not, drop it")
    return carried


def _same(before, value) -> bool:
    """Whether two cells hold one value, NA equal to NA (as encode_frame's
    nunique(dropna=False) counts them)."""
    try:
        if pd.isna(before) and pd.isna(value):
            return True
    except (TypeError, ValueError):  # Array-like cells.
        pass
    try:
        return bool(before == value)
    except (TypeError, ValueError):
        return False


def encode(settings: Settings, partition: int, part: pd.DataFrame,
           positions: Optional[List[np.ndarray]], lane: int,
           carry: Carry) -> Tuple[pd.DataFrame, Carry]:
    """Lane `lane` of partition `partition` encoded with the carried
    states: (features of the lane's rows in their input order, the carry
    for the lane's next partition).

    On an error that names a row, the partition is encoded again whole
    (same states for this lane's series; the other lanes' series start
    afresh, which adds no error of its own), so that the error numbers the
    rows of the partition, not of the lane; the rows and fields it names
    are then the partition's, whatever the lane count."""
    rows = part if positions is None else part.take(positions[lane])
    try:
        constants = _check_constants(settings, partition, part,
                                     carry.constants)
        result = _call(settings, f"partition {partition}", rows,
                       call_states(settings, carry))
    except PhasorError as error:
        if positions is not None and error.field_violations():
            try:
                _call(settings, f"partition {partition}", part,
                      call_states(settings, carry))
            except PhasorError as whole_error:
                error = whole_error
        raise in_partition(error, partition) from None
    states = dict(carry.states)
    states.update(result.states)
    return result.frame, Carry(states, constants)


def features(encoded: Tuple[pd.DataFrame, Carry]) -> pd.DataFrame:
    """The features of encode()'s result (one lane: the partition's)."""
    return encoded[0]


def assemble(part: pd.DataFrame, positions: List[np.ndarray],
             encoded: Sequence[Tuple[pd.DataFrame, Carry]]) -> pd.DataFrame:
    """The partition's features from its lanes', in the input's row order,
    indexed by the partition's index."""
    first = encoded[0][0]
    out = np.empty((len(part), first.shape[1]), dtype=first.dtypes.iloc[0]
                   if first.shape[1] else np.float32)
    for rows, (lane_features, _) in zip(positions, encoded):
        out[rows] = lane_features.to_numpy()
    return pd.DataFrame(out, index=part.index, columns=first.columns)


def final_states(encoded: Sequence[Tuple[pd.DataFrame, Carry]]
                 ) -> pd.Series:
    """pd.Series {series id: SeriesState} after the whole frame, for the
    series it holds (encode_frame's FrameResult.states): the last carries
    of every chain (a lane, or a partition when series do not span
    partitions) merged."""
    merged: Dict[Any, Any] = {}
    for _, carry in encoded:
        merged.update(carry.states)
    return pd.Series(list(merged.values()), dtype=object, name="state",
                     index=pd.Index(list(merged.keys()), dtype=object,
                                     tupleize_cols=False))


def probe(settings: Settings, meta: pd.DataFrame) -> pd.DataFrame:
    """The features of `meta`'s zero rows: the output's columns and dtype
    (an empty frame), from one call to the server (the panel's probe)."""
    return _call(settings, "the meta call", meta, settings.states).frame


def time_extent(part: pd.DataFrame, column) -> Tuple[bool, float]:
    """(any non-zero time, largest |time| as float64) of a partition's
    integer times: what encode_frame's near-epoch check reads
    (times.read_times)."""
    ints = np.asarray(_frame._column(part, column, "time_column"))
    ints = ints.astype(np.int64, copy=False)
    if not len(ints):
        return False, 0.0
    return bool(np.any(ints != 0)), float(
        np.max(np.abs(ints.astype(np.float64))))


def channel_labels(part: pd.DataFrame, column) -> np.ndarray:
    """The partition's channel labels, NA dropped, in order of first
    appearance."""
    labels = _frame._column(part, column, "channel_column")
    return pd.unique(labels.dropna())
