"""The bodies of EncoderClient's streams: encode_observations_stream (one
series, chunk after chunk) and encode_panel_stream (the same S series,
chunk after chunk), each over one EncodeObservationsStream call whose
server carries every series' state from chunk to chunk. The methods'
contracts are their docstrings in client.py.

Both are generators, like the methods: nothing is sent before the caller
iterates. A request that fails the client's own checks while gRPC pulls it
cancels the call and is raised to the caller (gRPC itself would swallow it,
"Exception iterating requests!").
"""

from __future__ import annotations

import grpc
import numpy as np

from . import _panel
from . import frame as _frame, specs as _specs
from ._observations import wide_request
from ._panel_calls import panel_rows
from ._requests import no_shortcut, set_config
from ._stubs import encoder_pb2 as pb
from ._types import Features, Panel
from .errors import InvalidInputError, PhasorError
from .tensors import dtype_enum, from_tensor

# The keys of an encode_panel_stream chunk: encode_panel's row arguments.
PANEL_ROW_KEYS = frozenset((
    "timestamps", "values", "mask", "content", "event_times",
    "event_channels", "event_values", "series_offsets", "series_ids"))


def encode_observations_stream(client, chunks, *, spec, profile,
                               output_dtype, time_unit, blocks):
    """EncoderClient.encode_observations_stream; `blocks` holds the keyword
    blocks (content, time, time2vec, gaps, calendar, combine, d_model)."""
    config = _specs.temporal_config(spec, profile, blocks)
    # gRPC swallows an exception raised while it pulls requests
    # ("Exception iterating requests!"): keep it, cancel the call and
    # raise it to the caller instead.
    failure = []
    call = {}

    def requests():
        try:
            for index, chunk in enumerate(chunks):
                if isinstance(chunk, tuple):
                    timestamps = chunk[0]
                    values = chunk[1] if len(chunk) > 1 else None
                    mask = chunk[2] if len(chunk) > 2 else None
                else:
                    timestamps, values, mask = chunk, None, None
                try:
                    request, zone = wide_request(
                        timestamps, values, mask, None, None, time_unit)
                except InvalidInputError as error:
                    field, description = error.field_violations()[0]
                    raise InvalidInputError(f"chunks[{index}].{field}",
                                            description) from None
                request.message.output_dtype = dtype_enum(output_dtype)
                if index == 0:
                    set_config(request.message, profile,
                               _frame.apply_data_zone(config, zone),
                               no_shortcut)
                yield request
        except Exception as error:  # noqa: BLE001 - re-raised below
            failure.append(error)
            if "responses" in call:
                call["responses"].cancel()

    responses = client._stub.EncodeObservationsStream(
        requests(), timeout=client.deadline_seconds,
        metadata=client._metadata)
    call["responses"] = responses
    try:
        for response in responses:
            yield Features(from_tensor(response.features),
                           list(response.schema), response.state)
    except grpc.RpcError as error:
        if failure:
            raise failure[0] from None
        raise PhasorError.from_rpc_error(error) from None
    if failure:
        raise failure[0]


def encode_panel_stream(client, chunks, *, time_zones, time_zone_index,
                        states, spec, profile, output_dtype, channel_names,
                        num_channels, time_unit, blocks):
    """EncoderClient.encode_panel_stream; `blocks` as
    encode_observations_stream's."""
    config = _specs.temporal_config(spec, profile, blocks)
    if states is not None:
        states = [state if state is not None else pb.SeriesState()
                  for state in states]
    failure = []
    call = {}

    def requests():
        base = None
        try:
            for index, chunk in enumerate(chunks):
                unknown = set(chunk) - PANEL_ROW_KEYS
                if unknown:
                    raise ValueError(
                        f"chunks[{index}]: unknown keys {sorted(unknown)};"
                        f" expected {sorted(PANEL_ROW_KEYS)}")
                try:
                    parsed, row_tensors, rows, offsets, _ = panel_rows(
                        chunk.get("timestamps"), chunk.get("values"),
                        chunk.get("mask"), chunk.get("content"),
                        chunk.get("event_times"), chunk.get("event_channels"),
                        chunk.get("event_values"),
                        chunk.get("series_offsets"), chunk.get("series_ids"),
                        time_unit, output_dtype)
                except InvalidInputError as error:
                    field, description = error.field_violations()[0]
                    raise InvalidInputError(f"chunks[{index}].{field}",
                                            description) from None
                if base is None:
                    base = pb.EncodeObservationsRequest(
                        output_dtype=dtype_enum(output_dtype))
                    first_config = (config if time_zones else
                                    _frame.apply_data_zone(
                                        config, parsed.time_zone))
                    set_config(base, profile, first_config, no_shortcut)
                    base.observations.channel_names.extend(
                        channel_names or [])
                    long_layout = "event_times" in chunk
                    if num_channels:
                        base.observations.num_channels = num_channels
                    elif long_layout and not channel_names:
                        # Later chunks may not show every channel.
                        base.observations.num_channels = (
                            len(states[0].channels)
                            if states and states[0].channels else
                            int(np.max(row_tensors[1].array)) + 1
                            if rows else 0)
                    request_base = base
                else:
                    request_base = pb.EncodeObservationsRequest(
                        output_dtype=base.output_dtype,
                        observations=base.observations)
                layout = _panel.Layout(
                    pb, rows, offsets, row_tensors, request_base,
                    time_zones, time_zone_index,
                    states if index == 0 else None)
                whole = _panel.Piece(0, len(offsets) - 1, 0, rows)
                yield layout.request(whole, whole=True)
        except Exception as error:  # noqa: BLE001 - re-raised below
            failure.append(error)
            if "responses" in call:
                call["responses"].cancel()

    responses = client._stub.EncodeObservationsStream(
        requests(), timeout=client.deadline_seconds,
        metadata=client._metadata)
    call["responses"] = responses
    try:
        for response in responses:
            yield Panel(from_tensor(response.features),
                        list(response.schema), list(response.states),
                        from_tensor(response.series_offsets))
    except grpc.RpcError as error:
        if failure:
            raise failure[0] from None
        raise PhasorError.from_rpc_error(error) from None
    if failure:
        raise failure[0]
