"""numpy arrays <-> phasor.v1.Tensor.

A Tensor is raw little-endian, row-major bytes plus shape and dtype, so the
conversion is a byte copy one way (ndarray.tobytes; attach() defers even
that to the request's serialization, _wire.py) and no copy the other
(np.frombuffer over the received bytes; the array is read-only, as it views
the message's immutable bytes — call .copy() to modify it).

bfloat16 has no numpy dtype: it is sent from float32 by rounding to nearest
even and received by widening to float32, which is exact.
"""

from __future__ import annotations

from typing import Tuple, Union

import numpy as np
import numpy.typing as npt

from . import _stubs, _wire

pb = _stubs.load().encoder_pb2

# What a `dtype=` argument takes: a numpy dtype (or anything np.dtype takes),
# a name ("float32", "bfloat16", ...; numpy has no bfloat16) or a
# phasor.v1.DType value; None means unspecified.
DTypeLike = Union[int, str, npt.DTypeLike]

_NUMPY_TO_DTYPE = {
    np.dtype(np.float32): pb.FLOAT32,
    np.dtype(np.float16): pb.FLOAT16,
    np.dtype(np.float64): pb.FLOAT64,
    np.dtype(np.int64): pb.INT64,
    np.dtype(np.int32): pb.INT32,
    np.dtype(np.uint8): pb.UINT8,
    np.dtype(np.bool_): pb.BOOL,
}
_DTYPE_TO_NUMPY = {value: key for key, value in _NUMPY_TO_DTYPE.items()}

# Names accepted wherever a dtype is asked for, besides numpy dtypes.
_NAMES = {
    "float32": pb.FLOAT32, "float16": pb.FLOAT16, "bfloat16": pb.BFLOAT16,
    "float64": pb.FLOAT64, "int64": pb.INT64, "int32": pb.INT32,
    "uint8": pb.UINT8, "bool": pb.BOOL,
}


def dtype_enum(dtype: DTypeLike) -> int:
    """phasor.v1.DType for a numpy dtype, a name ("bfloat16") or the enum."""
    if dtype is None:
        return pb.DTYPE_UNSPECIFIED
    if isinstance(dtype, int) and dtype in pb.DType.values():
        return dtype
    if isinstance(dtype, str) and dtype.lower() in _NAMES:
        return _NAMES[dtype.lower()]
    key = np.dtype(dtype)
    if key not in _NUMPY_TO_DTYPE:
        raise TypeError(f"no phasor.v1.DType for numpy dtype {key}")
    return _NUMPY_TO_DTYPE[key]


def _bfloat16_bits(values):
    """float32 -> bfloat16 bits, round to nearest even; NaN stays NaN."""
    bits = np.ascontiguousarray(values, dtype="<f4").view("<u4")
    rounded = (bits + (0x7FFF + ((bits >> 16) & 1))) >> 16
    nan = np.isnan(values)
    rounded = np.where(nan, (bits >> 16) | 0x0040, rounded)
    return rounded.astype("<u2")


def wire_array(array: npt.ArrayLike,
               dtype: DTypeLike = None) -> Tuple[np.ndarray, int]:
    """(`array` as the wire has it — C-contiguous, little-endian, bfloat16
    as its bits; the array itself when it already is —, its DType).

    dtype None keeps the array's own dtype (Python floats become float64,
    ints int64).
    """
    array = np.asarray(array)
    target = dtype_enum(dtype) if dtype is not None else dtype_enum(array.dtype)
    if target == pb.BFLOAT16:
        wired = _bfloat16_bits(array.astype(np.float32)).reshape(array.shape)
    else:
        little = _DTYPE_TO_NUMPY[target].newbyteorder("<")
        wired = np.ascontiguousarray(array, dtype=little)
    return wired, target


def to_tensor(array: npt.ArrayLike, dtype: DTypeLike = None) -> pb.Tensor:
    """A Tensor holding `array` (anything np.asarray takes) as `dtype`
    (wire_array)."""
    wired, target = wire_array(array, dtype)
    return pb.Tensor(shape=list(wired.shape), dtype=target,
                     data=wired.tobytes())


def attach(request: _wire.Outgoing, path: str, array: npt.ArrayLike,
           dtype: DTypeLike = None) -> None:
    """Sets the Tensor at `path` of the request to `array` as `dtype`
    (wire_array, then _wire.Outgoing.attach: appended from the array at
    serialization when large, set in the message when small)."""
    wired, target = wire_array(array, dtype)
    request.attach(path, wired.shape, target, wired)


def from_tensor(tensor: pb.Tensor) -> np.ndarray:
    """The Tensor's values as a numpy array of its shape (no copy)."""
    shape = tuple(tensor.shape)
    if tensor.dtype == pb.BFLOAT16:
        bits = np.frombuffer(tensor.data, dtype="<u2").astype(np.uint32)
        return (bits << 16).view(np.float32).reshape(shape)
    if tensor.dtype not in _DTYPE_TO_NUMPY:
        raise ValueError(f"tensor has unknown dtype {tensor.dtype}")
    little = _DTYPE_TO_NUMPY[tensor.dtype].newbyteorder("<")
    return np.frombuffer(tensor.data, dtype=little).reshape(shape)
