"""What every request builder of EncoderClient shares: the config oneof
(profile=, spec= or the method's shortcut keywords), positions from an array
or a range, enum values by name, and output dtypes.

Pure functions of their arguments; no calls.
"""

from __future__ import annotations

import numpy as np

from . import specs as _specs
from ._stubs import encoder_pb2 as pb
from .tensors import dtype_enum, to_tensor

# Bytes per output element for EncodeObservationsRequest.output_dtype.
OUTPUT_ITEMSIZE = {pb.DTYPE_UNSPECIFIED: 4, pb.FLOAT32: 4, pb.FLOAT16: 2,
                   pb.BFLOAT16: 2, pb.FLOAT64: 8}


def content_dtype(content, output_dtype):
    """The wire dtype of observation content embeddings: float16 as sent,
    float64 as sent when the output is float64 too (the server then scales
    it in double), otherwise float32."""
    if content.dtype == np.float16:
        return np.float16
    if content.dtype == np.float64 and dtype_enum(output_dtype) == pb.FLOAT64:
        return np.float64
    return np.float32


def to_positions(positions, count, start, step):
    """A phasor.v1.Positions from an array, or the range start/count/step."""
    if positions is not None:
        values = np.asarray(positions).reshape(-1)
        integral = np.issubdtype(values.dtype, np.integer)
        return pb.Positions(
            values=to_tensor(values, "int64" if integral else "float64"))
    if count is None:
        raise ValueError("give positions= or count=")
    proto_range = pb.Positions.Range(start=start, count=count)
    if step != 1:
        proto_range.step = step
    return pb.Positions(range=proto_range)


def set_config(request, profile, spec, shortcut):
    """Fills the request's config oneof: profile, spec, or shortcut().
    spec: an EncoderSpec message (or the Temporal / Positional / Rope spec
    inside), its text format, or a dict (specs.encoder_spec)."""
    if profile:
        request.profile = profile
    elif spec is not None:
        request.spec.CopyFrom(_specs.encoder_spec(spec))
    else:
        request.spec.CopyFrom(shortcut())


def no_shortcut():
    """The shortcut of methods without one: spec= or profile= is needed."""
    raise ValueError("give spec= or profile=")


def enum_value(enum_type, name):
    """An enum value from its name, case-insensitively (None = unset)."""
    if name is None:
        return 0
    if isinstance(name, int):
        return name
    return enum_type.Value(name.upper())


def rope_spec(rotary_dim, base, layout, scaling, fold_attention_factor,
              max_position_embeddings, seq_len):
    """The RoPE methods' keywords as an EncoderSpec, checked as spec= is
    (specs.rope_config)."""
    return _specs.rope_config(rotary_dim, base, layout, scaling,
                              fold_attention_factor, max_position_embeddings,
                              seq_len)
