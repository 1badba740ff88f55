"""The bodies of EncoderClient's one-series temporal methods:
encode_observations (wide: timestamps, values, mask) and encode_events
(long: one (time, channel, value) event per row), each one
EncodeObservations call. wide_request builds the wide request the stream of
one series (_streams.py) sends chunk by chunk too. The methods' contracts
are their docstrings in client.py.
"""

from __future__ import annotations

import numpy as np

from . import _wire
from . import frame as _frame, specs as _specs
from ._requests import content_dtype, no_shortcut, set_config
from ._stubs import encoder_pb2 as pb
from ._types import Features
from .errors import InvalidInputError
from .tensors import attach, dtype_enum, from_tensor
from .times import read_times


def wide_request(timestamps, values, mask, content, channel_names,
                 time_unit=None, output_dtype="float32"):
    """(an _wire.Outgoing EncodeObservationsRequest holding the
    observations of one wide series, tz-aware input's zone or None);
    values may be None (timestamps only)."""
    times = read_times(timestamps, "timestamps", time_unit)
    request = _wire.Outgoing(pb.EncodeObservationsRequest(
        observations=pb.Observations(channel_names=channel_names or [])))
    attach(request, "observations.timestamps", times.array,
           times.wire_dtype)
    if values is not None:
        values = np.asarray(values)
        if values.ndim == 1:
            values = values[:, None]
        attach(request, "observations.values", values,
               values.dtype if values.dtype == np.float32 else "float64")
    if mask is not None:
        attach(request, "observations.mask", mask, "uint8")
    if content is not None:
        content = np.asarray(content)
        attach(request, "observations.content", content,
               content_dtype(content, output_dtype))
    return request, times.time_zone


def encode_observations(client, timestamps, values, mask, *, spec, profile,
                        state, content, channel_names, output_dtype,
                        time_unit, blocks):
    """EncoderClient.encode_observations; `blocks` holds the keyword
    blocks (content, time, time2vec, gaps, calendar, combine, d_model)."""
    request, zone = wide_request(timestamps, values, mask, content,
                                 channel_names, time_unit, output_dtype)
    return _encode_one_series(client, request, zone, spec, profile, state,
                              output_dtype, blocks)


def encode_events(client, times, channels, values, *, spec, profile, state,
                  num_channels, channel_names, content, output_dtype,
                  time_unit, blocks):
    """EncoderClient.encode_events; `blocks` as encode_observations'."""
    parsed = read_times(times, "event_times", time_unit)
    channels = np.asarray(channels)
    if channels.shape != parsed.array.shape:
        raise InvalidInputError(
            "event_channels", f"expected {len(parsed.array)} channels, "
                              f"one per time, got shape {channels.shape}")
    if channels.dtype.kind not in "iu":
        if channel_names is None:
            raise InvalidInputError(
                "event_channels", f"channels of dtype {channels.dtype} "
                                  f"need channel_names= to number them")
        lookup = {name: index for index, name in enumerate(channel_names)}
        numbers = [lookup.get(name, -1) for name in channels.tolist()]
        if -1 in numbers:
            row = numbers.index(-1)
            raise InvalidInputError(
                f"event_channels[{row}]",
                f"{channels[row]!r} is not in channel_names")
        channels = np.asarray(numbers, dtype=np.int32)
    request = _wire.Outgoing(pb.EncodeObservationsRequest(
        observations=pb.Observations(channel_names=channel_names or [])))
    attach(request, "observations.event_times", parsed.array,
           parsed.wire_dtype)
    attach(request, "observations.event_channels", channels, "int32")
    if values is not None:
        values = np.asarray(values)
        attach(request, "observations.event_values", values,
               values.dtype if values.dtype == np.float32 else "float64")
    if num_channels:
        request.message.observations.num_channels = num_channels
    if content is not None:
        content = np.asarray(content)
        attach(request, "observations.content", content,
               content_dtype(content, output_dtype))
    return _encode_one_series(client, request, parsed.time_zone, spec,
                              profile, state, output_dtype, blocks)


def _encode_one_series(client, request, zone, spec, profile, state,
                       output_dtype, blocks):
    """One EncodeObservations call of `request` (an _wire.Outgoing
    holding the observations): the spec from `spec`/`profile`/the
    keyword `blocks`, the data's time zone applied, `state` continued."""
    config = _frame.apply_data_zone(
        _specs.temporal_config(spec, profile, blocks), zone)
    request.message.output_dtype = dtype_enum(output_dtype)
    set_config(request.message, profile, config, no_shortcut)
    if state is not None:
        request.message.state.CopyFrom(state)
    response = client._call(client._stub.EncodeObservations, request)
    return Features(from_tensor(response.features), list(response.schema),
                    response.state)
