"""Panels for EncodeObservations: many series in as few messages as fit.

A panel is S series stacked row-wise, series s owning rows
[series_offsets[s], series_offsets[s+1]) of every row tensor. The server
encodes each series as if it came alone, so a panel may be cut at series
boundaries into independent requests, and one series may be cut into chunks
sent one after another with the state carried between them: the joined
features equal those of one call, bytewise (proto/phasor/v1/encoder.proto,
Observations.series_offsets and SeriesState).

Why the client cuts: gRPC refuses a message over max_message_bytes on either
side, and the server refuses a request whose input or output would exceed its
message or element limit (RESOURCE_EXHAUSTED). The output width F depends on
the spec (or a server profile), so it is learnt from the server: a request with
one empty series returns features of shape [0, F] and the schema, and the
client remembers F per configuration.

Plan: each request is held to PIECE_FRACTION of the message limit, and to at
most PIECE_BYTES, in both directions (input bytes, and rows × F × dtype size
plus states and schema out) and to PIECE_ELEMENTS output elements, half the
server's default element limit. Series are packed greedily, in order, into
groups under that budget; a series over it alone becomes a chain of row
chunks, each sent after the previous one returned its state. Up to
MAX_IN_FLIGHT requests run at once (grpc futures). A request the server still
refuses with RESOURCE_EXHAUSTED (a server with lower limits than the client) is
halved and sent again, down to one row.

Not thread-safe per call; an EncoderClient running several panels at once is
(each call has its own plan and buffers).
"""

import collections
import queue
from typing import List

import grpc
import numpy as np

from . import _wire
from .errors import (Segment, format_field_path, parse_field_path,
                     render_field_message)
from .tensors import attach, from_tensor, to_tensor

# Fraction of max_message_bytes one split request may use: room for framing,
# for estimates that are a little low, and for gRPC's own overhead.
PIECE_FRACTION = 0.5
# ... and at most this many bytes, whatever the limit. gRPC Python (cygrpc,
# 1.51) assembles each received message by appending its slices to a
# bytearray, which it then copies into a bytes object: a reply of tens of MiB
# is copied several times, each time into freshly faulted pages (glibc maps
# such blocks anew), so replies of tens of MiB cost the client far more page
# faults and CPU than 2 MiB ones; smaller calls cost more per byte, larger
# ones fault again (figures: docs/BENCHMARKS.md, "Python client").
PIECE_BYTES = 2 << 20
# Output elements per split request: half of phasor-server's default
# --max_elements_per_request (1 << 24).
PIECE_ELEMENTS = 1 << 23
# Requests in flight at once: enough to overlap serialisation, transfer and
# the server's work; more only queues on a server with few cores.
MAX_IN_FLIGHT = 4
# Upper bound of one serialized SeriesState: two optional int64 times (11
# bytes each with tags) plus per channel two optional int64 times and two
# doubles (4 tags, 38 bytes, 2 of framing).
_STATE_FIXED_BYTES = 32
_STATE_CHANNEL_BYTES = 48
# Serialized overhead per request not covered by the estimate (tensor headers,
# field tags, the spec).
_REQUEST_SLACK_BYTES = 4096


def call_bytes(max_message_bytes):
    """Bytes one request of a cut panel or RoPE batch may carry in either
    direction, under a client limit of max_message_bytes."""
    return max(1, min(int(max_message_bytes * PIECE_FRACTION), PIECE_BYTES))


def offsets_from_ids(series_ids, rows):
    """series_offsets for rows labelled by series, each series' rows
    contiguous: a new series starts wherever the label changes."""
    ids = np.asarray(series_ids)
    if ids.ndim != 1 or ids.shape[0] != rows:
        raise ValueError(f"series_ids: expected {rows} labels, one per row, "
                         f"got shape {ids.shape}")
    if rows == 0:
        return np.zeros(1, dtype=np.int64)
    starts = np.flatnonzero(ids[1:] != ids[:-1]) + 1
    offsets = np.concatenate(([0], starts, [rows])).astype(np.int64)
    if len(np.unique(ids[offsets[:-1]])) != len(offsets) - 1:
        raise ValueError("series_ids: each series' rows must be contiguous "
                         "(sort by series, then time)")
    return offsets


class RowTensor(collections.namedtuple("RowTensor",
                                       ["field", "array", "dtype"])):
    """A per-row input tensor: its Observations field, the array (rows
    first) and the wire dtype."""

    @property
    def row_bytes(self):
        inner = int(np.prod(self.array.shape[1:], dtype=np.int64))
        return inner * np.dtype(self.dtype).itemsize

    def tensor(self, begin, end):
        return to_tensor(self.array[begin:end], self.dtype)


# One request's share: series [series_begin, series_end) and rows
# [row_begin, row_end) of the panel. A chunk of one long series has
# series_end = series_begin + 1 and a row range inside it.
Piece = collections.namedtuple(
    "Piece", ["series_begin", "series_end", "row_begin", "row_end"])


class Layout:
    """Everything of a panel call except the row ranges: builds the request
    for any piece."""

    def __init__(self, pb, rows, offsets, row_tensors, base_request,
                 time_zones, time_zone_index, states):
        self.pb = pb
        self.rows = rows
        self.offsets = offsets
        self.row_tensors = row_tensors
        # Config, output dtype, channel names, num_channels; no rows.
        self.base_request = base_request
        self.time_zones = list(time_zones) if time_zones else []
        self.time_zone_index = time_zone_index
        self.states = states

    @property
    def num_series(self):
        return len(self.offsets) - 1

    def request(self, piece, state=None, whole=False):
        """The request for `piece` (an _wire.Outgoing: its row tensors go
        from the arrays to the wire); `state` continues a chunked series."""
        request = self.pb.EncodeObservationsRequest()
        request.CopyFrom(self.base_request)
        outgoing = _wire.Outgoing(request)
        observations = request.observations
        for row_tensor in self.row_tensors:
            attach(outgoing, "observations." + row_tensor.field,
                   row_tensor.array[piece.row_begin:piece.row_end],
                   row_tensor.dtype)
        if whole:
            # The caller's own fields, so errors and zones read as given.
            offsets = self.offsets
        elif piece.series_end - piece.series_begin == 1:
            offsets = np.array([0, piece.row_end - piece.row_begin])
        else:
            offsets = (self.offsets[piece.series_begin:piece.series_end + 1]
                       - piece.row_begin)
        attach(outgoing, "observations.series_offsets", offsets, "int64")
        if self.time_zones:
            if whole:
                observations.time_zones.extend(self.time_zones)
                if self.time_zone_index is not None:
                    observations.time_zone_index.CopyFrom(
                        to_tensor(self.time_zone_index, "int32"))
            else:
                index = self.time_zone_index[piece.series_begin:
                                             piece.series_end]
                used, local = np.unique(index, return_inverse=True)
                observations.time_zones.extend(
                    self.time_zones[i] for i in used)
                observations.time_zone_index.CopyFrom(
                    to_tensor(local.astype(np.int32), "int32"))
        if state is not None:
            request.states.append(state)
        elif self.states:
            request.states.extend(
                self.states[piece.series_begin:piece.series_end])
        return outgoing

    def probe(self):
        """A request with one empty series: its reply gives F and the
        schema."""
        request = self.pb.EncodeObservationsRequest()
        request.CopyFrom(self.base_request)
        for row_tensor in self.row_tensors:
            getattr(request.observations, row_tensor.field).CopyFrom(
                row_tensor.tensor(0, 0))
        request.observations.series_offsets.CopyFrom(
            to_tensor(np.zeros(2, dtype=np.int64), "int64"))
        return request


def resolve_time_zone_index(time_zones, time_zone_index, num_series):
    """INT32 [S] zone indices, for cutting: the proto lets the index be
    omitted for one name or exactly S names."""
    if time_zone_index is not None:
        index = np.asarray(time_zone_index)
        if index.shape != (num_series,):
            raise ValueError(f"time_zone_index: expected shape "
                             f"({num_series},), got {index.shape}")
        if len(index) and (index.min() < 0 or index.max() >= len(time_zones)):
            raise ValueError(f"time_zone_index: values must be in "
                             f"[0, {len(time_zones)})")
        return index.astype(np.int32)
    if len(time_zones) == 1:
        return np.zeros(num_series, dtype=np.int32)
    if len(time_zones) == num_series:
        return np.arange(num_series, dtype=np.int32)
    raise ValueError(f"time_zones: {len(time_zones)} names for {num_series} "
                     f"series; give one name, one per series, or "
                     f"time_zone_index")


class Budget(collections.namedtuple(
        "Budget", ["bytes", "elements", "width", "out_itemsize",
                   "out_fixed_bytes", "in_fixed_bytes", "state_bytes"])):
    """What one request may carry."""


def plan(layout, budget):
    """Jobs: lists of pieces; a job's pieces run in order (a chain carries
    state), different jobs are independent. None when one request holds the
    whole panel."""
    offsets = layout.offsets
    num_series = layout.num_series
    row_in = sum(t.row_bytes for t in layout.row_tensors)
    row_out = budget.width * budget.out_itemsize
    # Per series: its offset (8 bytes), zone index (4) and state, in and out.
    series_in = 12 + (budget.state_bytes if layout.states else 0)
    series_out = 8 + budget.state_bytes
    series = np.arange(num_series + 1, dtype=np.int64)
    prefix_in = offsets * row_in + series * series_in
    prefix_out = offsets * row_out + series * series_out
    prefix_elements = offsets * budget.width
    room_in = budget.bytes - budget.in_fixed_bytes
    room_out = budget.bytes - budget.out_fixed_bytes
    if (prefix_in[-1] <= room_in and prefix_out[-1] <= room_out
            and prefix_elements[-1] <= budget.elements):
        return None
    # Rows of one chunk of a series too large for a request of its own.
    chunk_rows = max(1, min(max(room_in - series_in, 0) // max(row_in, 1),
                            max(room_out - series_out, 0) // max(row_out, 1),
                            budget.elements // max(budget.width, 1)))
    jobs = []
    begin = 0
    while begin < num_series:
        end = min(
            np.searchsorted(prefix_in, prefix_in[begin] + room_in, "right"),
            np.searchsorted(prefix_out, prefix_out[begin] + room_out, "right"),
            np.searchsorted(prefix_elements,
                            prefix_elements[begin] + budget.elements,
                            "right")) - 1
        if end > begin:
            jobs.append([Piece(begin, int(end), int(offsets[begin]),
                               int(offsets[end]))])
            begin = int(end)
            continue
        # Series `begin` alone is over the budget: a chain of row chunks.
        first, last = int(offsets[begin]), int(offsets[begin + 1])
        jobs.append([Piece(begin, begin + 1, row, min(row + chunk_rows, last))
                     for row in range(first, last, chunk_rows)])
        begin += 1
    return jobs


def halves(piece, offsets):
    """Two pieces covering `piece`, for a request the server refused as too
    large; None for a single row."""
    if piece.series_end - piece.series_begin > 1:
        # Cut at the series boundary nearest the middle row.
        middle_row = (piece.row_begin + piece.row_end) // 2
        cut = int(np.searchsorted(offsets, middle_row, "left"))
        cut = min(max(cut, piece.series_begin + 1), piece.series_end - 1)
        return (Piece(piece.series_begin, cut, piece.row_begin,
                      int(offsets[cut])),
                Piece(cut, piece.series_end, int(offsets[cut]),
                      piece.row_end))
    if piece.row_end - piece.row_begin <= 1:
        return None
    middle = (piece.row_begin + piece.row_end) // 2
    return (Piece(piece.series_begin, piece.series_end, piece.row_begin,
                  middle),
            Piece(piece.series_begin, piece.series_end, middle,
                  piece.row_end))


# Fields indexed by series besides observations.series[s]: states[s] and
# observations.time_zone_index[s].
_SERIES_INDEXED = ("states", "time_zone_index")


def renumber_segments(segments, piece, offsets, elements_per_row=None
                      ) -> List[Segment]:
    """A piece's field path (parse_field_path's segments) in the caller's
    numbering: series indices (observations.series[s], states[s],
    observations.time_zone_index[s]) shifted by the piece's first series,
    and for a chunk of one series the row index after
    observations.series[s] by the chunk's first row within the series. The
    server numbers a series' values and mask by element (row·C + channel),
    hence elements_per_row {field: elements}, 1 where not given."""
    elements_per_row = elements_per_row or {}
    row_shift = 0
    if piece.series_end - piece.series_begin == 1:
        row_shift = piece.row_begin - int(offsets[piece.series_begin])
    out = list(segments)
    for position, (name, index) in enumerate(out):
        if index is None:
            continue
        if name == "series" and position and \
                out[position - 1] == ("observations", None):
            if row_shift and position + 1 < len(out):
                field, row = out[position + 1]
                if field and row is not None:
                    out[position + 1] = (
                        field, row + row_shift * elements_per_row.get(field, 1))
        elif name not in _SERIES_INDEXED:
            continue
        out[position] = (name, index + piece.series_begin)
    return out


def panel_field(field, piece, offsets, elements_per_row=None) -> str:
    """A piece's field path (a BadRequest violation's field) in the
    caller's numbering (renumber_segments)."""
    return format_field_path(renumber_segments(
        parse_field_path(field), piece, offsets, elements_per_row))


class PanelError(grpc.RpcError, grpc.Call):
    """The server's error for one request of a split panel, with series and
    row indices renumbered as in the caller's panel. Code, details,
    trailing metadata (the BadRequest detail included) as gRPC's error.

    The server's field path is data: the BadRequest violation's field is
    renumbered through its segments (panel_field) and the message rendered
    again from the violation, as the server renders it
    (render_field_message); no message text is read. An error without a
    violation names no series or row and keeps its message.
    """

    def __init__(self, error, piece, offsets, elements_per_row, status_pb2,
                 error_details_pb2):
        super().__init__()
        self._error = error
        self._details = error.details() or ""
        trailers = []
        for key, value in error.trailing_metadata() or ():
            if key == "grpc-status-details-bin":
                status = status_pb2.Status.FromString(value)
                violations = []
                for detail in status.details:
                    bad_request = error_details_pb2.BadRequest()
                    if detail.Unpack(bad_request):
                        for violation in bad_request.field_violations:
                            violation.field = panel_field(
                                violation.field, piece, offsets,
                                elements_per_row)
                            violations.append(violation)
                        detail.Pack(bad_request)
                if len(violations) == 1:
                    self._details = render_field_message(
                        violations[0].field, violations[0].description)
                    status.message = self._details
                value = status.SerializeToString()
            trailers.append((key, value))
        self._trailers = tuple(trailers)

    def code(self):
        return self._error.code()

    def details(self):
        return self._details

    def trailing_metadata(self):
        return self._trailers

    def initial_metadata(self):
        return self._error.initial_metadata()

    def debug_error_string(self):
        return self._error.debug_error_string()

    def is_active(self):
        return False

    def time_remaining(self):
        return None

    def cancel(self):
        return False

    def add_callback(self, callback):
        return False

    def __str__(self):
        return (f"<PanelError of RPC that terminated with:\n"
                f"\tstatus = {self.code()}\n\tdetails = \"{self.details()}\">")


class _Job:
    def __init__(self, pieces):
        self.pieces = collections.deque(pieces)
        # (series, state) after the job's last single-series piece, carried
        # into the next chunk of that series.
        self.carried = None
        self.future = None


def run(jobs, layout, send, on_piece, max_in_flight, rpc_error_type):
    """Sends the jobs' pieces, at most max_in_flight at once, each job's in
    order; on_piece(piece, response) takes every reply (a chunked series'
    replies in row order). `send(request)`
    returns a grpc future. Errors cancel the calls in flight and raise
    (renumbered by rpc_error_type(error, piece))."""
    pending = collections.deque(_Job(pieces) for pieces in jobs)
    done = queue.Queue()
    active = set()

    def start(job):
        piece = job.pieces[0]
        state = None
        if (job.carried is not None
                and job.carried[0] == piece.series_begin
                and piece.row_begin > layout.offsets[piece.series_begin]):
            state = job.carried[1]
        request = layout.request(piece, state=state)
        job.future = send(request)
        active.add(job)
        job.future.add_done_callback(lambda _, job=job: done.put(job))

    try:
        while pending or active:
            while pending and len(active) < max_in_flight:
                start(pending.popleft())
            job = done.get()
            active.discard(job)
            piece = job.pieces[0]
            try:
                response = job.future.result()
            except grpc.RpcError as error:
                smaller = (halves(piece, layout.offsets)
                           if error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                           else None)
                if smaller is None:
                    raise rpc_error_type(error, piece) from None
                job.pieces.popleft()
                job.pieces.extendleft(reversed(smaller))
                start(job)
                continue
            job.pieces.popleft()
            if piece.series_end - piece.series_begin == 1:
                job.carried = (piece.series_begin, response.states[0])
            on_piece(piece, response)
            if job.pieces:
                start(job)
    finally:
        for job in active:
            job.future.cancel()
