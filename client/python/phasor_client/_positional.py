"""The bodies of EncoderClient's positional methods: encode_positions
(EncodePositions), alibi (AlibiBias), relative_bias (RelativeBias) and
describe (Describe). Each builds its request from the method's keywords,
makes one call through the client and returns numpy; the methods' contracts
are their docstrings in client.py.
"""

from __future__ import annotations

import numpy as np

from . import _wire
from ._requests import enum_value, rope_spec, set_config, to_positions
from ._stubs import encoder_pb2 as pb
from ._types import AlibiResult, RelativeBiasResult
from .tensors import attach, dtype_enum, from_tensor, to_tensor


def encode_positions(client, positions, *, count, start, step, dim, base,
                     layout, frequencies, learned_table, profile, spec,
                     content, content_scale, output_dtype):
    """EncoderClient.encode_positions."""
    request = pb.EncodePositionsRequest(
        positions=to_positions(positions, count, start, step),
        output_dtype=dtype_enum(output_dtype))

    def shortcut():
        if learned_table:
            return pb.EncoderSpec(positional=pb.PositionalSpec(
                learned=pb.LearnedSpec(table=learned_table)))
        if dim is None:
            raise ValueError("give dim=, learned_table=, spec= or profile=")
        sinusoidal = pb.SinusoidalSpec(
            dim=dim, layout=enum_value(pb.SinusoidalSpec.Layout, layout),
            frequencies=enum_value(pb.SinusoidalSpec.Frequencies, frequencies))
        if base is not None:
            sinusoidal.base = base
        return pb.EncoderSpec(
            positional=pb.PositionalSpec(sinusoidal=sinusoidal))

    set_config(request, profile, spec, shortcut)
    if content_scale is not None:
        request.content_scale = content_scale
    request = _wire.Outgoing(request)
    if content is not None:
        attach(request, "content", content, "float32")
    response = client._call(client._stub.EncodePositions, request)
    return from_tensor(response.encodings)


def alibi(client, num_heads, q_len, k_len, *, causal, output_dtype):
    """EncoderClient.alibi."""
    request = pb.AlibiBiasRequest(num_heads=num_heads, q_len=q_len,
                                  k_len=k_len, causal=causal,
                                  output_dtype=dtype_enum(output_dtype))
    response = client._call(client._stub.AlibiBias, request)
    bias = from_tensor(response.bias) if response.HasField("bias") else None
    return AlibiResult(from_tensor(response.slopes), bias)


def relative_bias(client, query_positions, key_positions, *, q_len, k_len,
                  q_start, k_start, num_buckets, max_distance, bidirectional,
                  max_relative_position, table, table_name, profile, spec,
                  include_bucket_ids, output_dtype):
    """EncoderClient.relative_bias."""
    def positions(values, count, start):
        if values is not None:
            array = np.asarray(values)
            if np.issubdtype(array.dtype, np.datetime64):
                array = array.astype("datetime64[ns]").view(np.int64)
            return to_positions(array, None, 0, 1)
        return to_positions(None, count, start, 1)

    request = pb.RelativeBiasRequest(
        query_positions=positions(query_positions, q_len, q_start),
        key_positions=positions(key_positions, k_len, k_start),
        output_dtype=dtype_enum(output_dtype),
        include_bucket_ids=include_bucket_ids)

    def shortcut():
        relative = pb.RelativeBiasSpec()
        if max_relative_position is not None:
            relative.shaw.max_relative_position = max_relative_position
        else:
            relative.t5.num_buckets = num_buckets
            relative.t5.max_distance = max_distance
            relative.t5.direction = (pb.RelativeBiasSpec.BIDIRECTIONAL
                                     if bidirectional
                                     else pb.RelativeBiasSpec.CAUSAL)
        return pb.EncoderSpec(relative_bias=relative)

    set_config(request, profile, spec, shortcut)
    if table_name:
        if not request.HasField("spec"):
            raise ValueError("table_name= needs an inline spec (a "
                             "profile names its own table)")
        request.spec.relative_bias.table = table_name
    if table is not None:
        request.table.CopyFrom(to_tensor(table))
    response = client._call(client._stub.RelativeBias, request)
    bias = (from_tensor(response.bias) if response.HasField("bias")
            else None)
    ids = (from_tensor(response.bucket_ids)
           if response.HasField("bucket_ids") else None)
    return RelativeBiasResult(bias, ids, response.num_buckets)


def describe(client, *, dim, rotary_dim, base, spec, profile, num_offsets,
             offset_step, seq_len):
    """EncoderClient.describe."""
    request = pb.DescribeRequest(num_offsets=num_offsets, seq_len=seq_len)
    if offset_step is not None:
        request.offset_step = offset_step

    def shortcut():
        if rotary_dim:
            return rope_spec(rotary_dim, base, None, None, None, 0, 0)
        if not dim:
            raise ValueError("give dim=, rotary_dim=, spec= or profile=")
        sinusoidal = pb.SinusoidalSpec(dim=dim)
        if base is not None:
            sinusoidal.base = base
        return pb.EncoderSpec(
            positional=pb.PositionalSpec(sinusoidal=sinusoidal))

    set_config(request, profile, spec, shortcut)
    return client._call(client._stub.Describe, request)
