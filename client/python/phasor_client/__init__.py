"""Python client for phasor-server (package phasor.v1, service Encoder).

numpy arrays in, numpy arrays out:

    from phasor_client import EncoderClient
    with EncoderClient("localhost:50051") as client:
        pe = client.encode_positions(count=128, dim=64)   # (128, 64) float32

Needs Debian's python3-grpcio, python3-protobuf and python3-numpy (run with
/usr/bin/python3, or a venv made from it with --system-site-packages).
Install with `pip install --no-build-isolation ./client/python`; the
protobuf/gRPC stubs are generated when the package is built, never at import
(see _stubs.py and docs/CLIENT.md). `python -m phasor_client` is a command
line with the C++ phasor-client's common calls.
"""

from .client import (DEFAULT_SERVICE_CONFIG, AlibiResult, EncoderClient,
                     Features, Panel, RelativeBiasResult, RopeResult,
                     RopeTables, field_violations, pb, serving_status_name)
from .tensors import dtype_enum, from_tensor, to_tensor
from .errors import FrameError, InvalidInputError, PhasorError
from .frame import FrameResult
from .schema import feature_names
from .specs import encoder_spec, rope_spec_from_hf, temporal_spec

__all__ = [
    "AlibiResult", "EncoderClient", "Features", "Panel", "RelativeBiasResult",
    "RopeResult", "RopeTables",
    "dtype_enum", "field_violations", "from_tensor", "pb",
    "serving_status_name", "to_tensor",
]
__all__ += ["DEFAULT_SERVICE_CONFIG"]
__all__ += ["FrameError", "FrameResult", "InvalidInputError", "PhasorError",
            "encoder_spec", "feature_names", "temporal_spec"]
__all__ += ["rope_spec_from_hf"]
