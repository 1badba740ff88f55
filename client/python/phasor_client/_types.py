"""The vocabulary of EncoderClient's signatures and results.

Argument types: ArrayLike, anything np.asarray takes (numpy arrays, lists,
pandas Series/Index; timestamps also take what times.py reads); BlockLike, a
temporal block (time=, gaps=, calendar=, ...) as a dict, True for the
defaults, its text format or its message (see specs.py); EnumLike, an enum
(layout=, frequencies=, combine=) by its name, case-insensitively, or value;
PathLike, a file name.

Results: the namedtuples the methods return (RopeResult, RopeTables,
AlibiResult, RelativeBiasResult, Features, Panel). phasor_client.client
re-exports every name here.
"""

from __future__ import annotations

import collections
import os
from typing import Any, Mapping, Union

import numpy.typing as npt
from google.protobuf import message as _message

ArrayLike = npt.ArrayLike
BlockLike = Union[None, bool, str, Mapping[str, Any], _message.Message]
EnumLike = Union[None, str, int]
PathLike = Union[str, os.PathLike[str]]

RopeResult = collections.namedtuple("RopeResult",
                                    ["query", "key", "attention_factor"])
RopeTables = collections.namedtuple(
    "RopeTables", ["cos", "sin", "attention_factor", "inv_freq"])
AlibiResult = collections.namedtuple("AlibiResult", ["slopes", "bias"])
RelativeBiasResult = collections.namedtuple(
    "RelativeBiasResult", ["bias", "bucket_ids", "num_buckets"])
Features = collections.namedtuple("Features", ["features", "schema", "state"])
Panel = collections.namedtuple(
    "Panel", ["features", "schema", "states", "series_offsets"])
