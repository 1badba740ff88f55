"""The body of EncoderClient.encode_panel: a panel's row arguments read into
wire tensors (panel_rows, which encode_panel_stream shares), then one
EncodeObservations call, or, for a panel over the message limits, the plan
of _panel.py (pieces of whole series, a series too long for one message in
chunks carried on with its state) sent concurrently and joined in row
order: the same result, bytewise, as one call. The method's contract is its
docstring in client.py.

The feature width F and the reply's fixed size, which the plan needs, come
from one call with an empty series and are remembered per configuration on
the client (client._panel_widths, under client._panel_widths_lock, since a
client may be shared by threads).
"""

from __future__ import annotations

import grpc
import numpy as np

from . import _panel
from . import frame as _frame, specs as _specs
from ._requests import OUTPUT_ITEMSIZE, content_dtype, no_shortcut, set_config
from ._stubs import encoder_pb2 as pb
from ._stubs import error_details_pb2 as _error_details
from ._stubs import status_pb2 as _status
from ._types import Panel
from .errors import PhasorError
from .tensors import dtype_enum, from_tensor
from .times import read_times


def encode_panel(client, timestamps, values, mask, *, series_offsets,
                 series_ids, time_zones, time_zone_index, states, spec,
                 profile, output_dtype, content, channel_names, event_times,
                 event_channels, event_values, num_channels, max_in_flight,
                 time_unit, blocks):
    """EncoderClient.encode_panel; `blocks` holds the keyword blocks
    (content, time, time2vec, gaps, calendar, combine, d_model)."""
    wide = timestamps is not None
    parsed, row_tensors, rows, offsets, values = panel_rows(
        timestamps, values, mask, content, event_times, event_channels,
        event_values, series_offsets, series_ids, time_unit, output_dtype)
    if states is not None:
        states = [state if state is not None else pb.SeriesState()
                  for state in states]

    base = pb.EncodeObservationsRequest(
        output_dtype=dtype_enum(output_dtype))
    config = _specs.temporal_config(spec, profile, blocks)
    if not time_zones:
        config = _frame.apply_data_zone(config, parsed.time_zone)
    set_config(base, profile, config, no_shortcut)
    base.observations.channel_names.extend(channel_names or [])
    if num_channels:
        base.observations.num_channels = num_channels
    elif not wide and rows:
        # Every cut must agree on C, which a chunk may not show.
        base.observations.num_channels = (
            len(channel_names) if channel_names else
            len(states[0].channels) if states and states[0].channels else
            int(np.max(row_tensors[1].array)) + 1)
    if len(offsets) == 1 and series_ids is not None:
        # No rows, no series: F from the probe, nothing to encode.
        return _panel_empty(client, base, row_tensors)

    layout = _panel.Layout(pb, rows, offsets, row_tensors, base,
                           time_zones, None, states)
    # Valid offsets are the server's to judge; only cut well-formed ones.
    cuttable = (len(offsets) >= 2 and offsets[0] == 0
                and offsets[-1] == rows
                and bool(np.all(np.diff(offsets) >= 0))
                and (states is None or len(states) in (0, len(offsets) - 1)))
    jobs = None
    if cuttable:
        budget = _panel_budget(client, layout, len(channel_names or ()) or
                               base.observations.num_channels or
                               (values.shape[1] if wide and
                                values is not None else 0))
        jobs = _panel.plan(layout, budget)
    if jobs is not None and time_zones:
        layout.time_zone_index = _panel.resolve_time_zone_index(
            list(time_zones), time_zone_index, layout.num_series)
    if jobs is None:
        layout.time_zone_index = time_zone_index
        whole = _panel.Piece(0, len(offsets) - 1, 0, rows)
        try:
            response = client._call(client._stub.EncodeObservations,
                                    layout.request(whole, whole=True))
        except grpc.RpcError as error:
            if (not cuttable or error.code() !=
                    grpc.StatusCode.RESOURCE_EXHAUSTED or rows <= 1):
                raise
            # The server's limits are below the client's: cut after all.
            jobs = [list(_panel.halves(whole, offsets) or [whole])]
            if time_zones:
                layout.time_zone_index = _panel.resolve_time_zone_index(
                    list(time_zones), time_zone_index, layout.num_series)
        else:
            return Panel(from_tensor(response.features),
                         list(response.schema), list(response.states),
                         from_tensor(response.series_offsets)
                         if response.HasField("series_offsets")
                         else offsets)
    return _panel_split(client, layout, jobs, max_in_flight)


def panel_rows(timestamps, values, mask, content, event_times,
               event_channels, event_values, series_offsets, series_ids,
               time_unit, output_dtype):
    """encode_panel's row arguments read into wire tensors:
    (parsed times, row tensors, rows, offsets [S+1], values [T, C] or
    None)."""
    wide = timestamps is not None
    if wide == (event_times is not None):
        raise ValueError("give timestamps= (wide) or event_times= (long)")
    if not wide and event_channels is None:
        raise ValueError("event_times= needs event_channels=")
    parsed = read_times(timestamps if wide else event_times,
                        "timestamps" if wide else "event_times",
                        time_unit)
    times, times_dtype = parsed.array, parsed.wire_dtype
    if wide:
        row_tensors = [_panel.RowTensor("timestamps", times, times_dtype)]
        if values is not None:
            values = np.asarray(values)
            if values.ndim == 1:
                values = values[:, None]
            row_tensors.append(_panel.RowTensor(
                "values", values,
                np.float32 if values.dtype == np.float32 else np.float64))
        if mask is not None:
            mask = np.asarray(mask)
            if mask.ndim == 1:
                mask = mask[:, None]
            row_tensors.append(_panel.RowTensor("mask", mask, np.uint8))
    else:
        row_tensors = [
            _panel.RowTensor("event_times", times, times_dtype),
            _panel.RowTensor("event_channels",
                             np.asarray(event_channels), np.int32)]
        if event_values is not None:
            event_values = np.asarray(event_values)
            row_tensors.append(_panel.RowTensor(
                "event_values", event_values,
                np.float32 if event_values.dtype == np.float32
                else np.float64))
    if content is not None:
        content = np.asarray(content)
        row_tensors.append(_panel.RowTensor(
            "content", content, content_dtype(content, output_dtype)))
    rows = len(times)
    for row_tensor in row_tensors:
        if row_tensor.array.shape[:1] != (rows,):
            raise ValueError(f"{row_tensor.field}: expected {rows} rows, "
                             f"got shape {row_tensor.array.shape}")

    if (series_offsets is None) == (series_ids is None):
        raise ValueError("give series_offsets= or series_ids=")
    if series_ids is not None:
        offsets = _panel.offsets_from_ids(series_ids, rows)
    else:
        offsets = np.asarray(series_offsets, dtype=np.int64).reshape(-1)
    return parsed, row_tensors, rows, offsets, values


def _panel_probe(client, layout):
    """(F, reply bytes besides the rows, schema) for the layout's
    configuration: remembered, else asked with one empty series."""
    key = (layout.base_request.SerializeToString(deterministic=True),
           tuple((t.field, t.array.shape[1:], np.dtype(t.dtype).str)
                 for t in layout.row_tensors))
    with client._panel_widths_lock:
        known = client._panel_widths.get(key)
    if known is not None:
        return known
    response = client._call(client._stub.EncodeObservations, layout.probe())
    features = from_tensor(response.features)
    width = features.shape[1] if features.ndim == 2 else 0
    known = (width, response.ByteSize(), list(response.schema))
    with client._panel_widths_lock:
        client._panel_widths[key] = known
    return known


def _panel_empty(client, base, row_tensors):
    """The Panel of no series: F and the schema from the probe."""
    layout = _panel.Layout(pb, 0, np.zeros(2, dtype=np.int64),
                           row_tensors, base, None, None, None)
    response = client._call(client._stub.EncodeObservations, layout.probe())
    return Panel(from_tensor(response.features), list(response.schema),
                 [], np.zeros(1, dtype=np.int64))


def _panel_budget(client, layout, num_channels):
    """What one piece may carry (_panel.Budget) under the client's limits."""
    width, reply_fixed, _ = _panel_probe(client, layout)
    return _panel.Budget(
        bytes=_panel.call_bytes(client.max_message_bytes),
        elements=_panel.PIECE_ELEMENTS, width=width,
        out_itemsize=OUTPUT_ITEMSIZE.get(layout.base_request.output_dtype,
                                         4),
        out_fixed_bytes=reply_fixed + _panel._REQUEST_SLACK_BYTES,
        in_fixed_bytes=(layout.base_request.ByteSize()
                        + sum(len(name) + 2 for name in
                              layout.time_zones)
                        + _panel._REQUEST_SLACK_BYTES),
        state_bytes=(_panel._STATE_FIXED_BYTES
                     + _panel._STATE_CHANNEL_BYTES * num_channels))


def _panel_split(client, layout, jobs, max_in_flight):
    """The pieces of `jobs` sent, up to max_in_flight at once, and joined
    into one Panel; a failed piece's error in the panel's numbering."""
    offsets = layout.offsets
    states = [None] * layout.num_series
    result = {}

    def on_piece(piece, response):
        features = from_tensor(response.features)
        if "features" not in result:
            result["features"] = np.empty(
                (layout.rows,) + features.shape[1:], dtype=features.dtype)
            result["schema"] = list(response.schema)
        result["features"][piece.row_begin:piece.row_end] = features
        states[piece.series_begin:piece.series_end] = response.states

    def send(request):
        return client._stub.EncodeObservations.future(
            request, timeout=client.deadline_seconds,
            metadata=client._metadata)

    elements_per_row = {
        t.field: int(np.prod(t.array.shape[1:], dtype=np.int64))
        for t in layout.row_tensors}

    def renumbered(error, piece):
        return PhasorError.from_rpc_error(_panel.PanelError(
            error, piece, offsets, elements_per_row, _status,
            _error_details))

    _panel.run(jobs, layout, send, on_piece, max(1, max_in_flight),
               renumbered)
    if "features" not in result:  # Every series empty.
        width, _, schema = _panel_probe(client, layout)
        result["features"] = np.empty((0, width), dtype=np.float32)
        result["schema"] = schema
    return Panel(result["features"], result["schema"], states, offsets)
