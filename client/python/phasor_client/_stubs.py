"""The protobuf/gRPC modules the client speaks, generated at BUILD time.

Nothing is compiled here: client/python/build_stubs.py generated
phasor_client/_proto/ when the package was built (by `pip install`, or by
CMake's phasor_python target for the build tree). A source checkout that was
never built has no _proto/ and fails here with a message saying so.

Coexistence with grpcio's own packages: the protobuf descriptor pool admits
each message name (grpc.health.v1.HealthCheckRequest, google.rpc.Status)
from one .proto file only. grpcio-health-checking and grpcio-reflection
register theirs as "grpc_health/v1/health.proto" and
"grpc_reflection/v1alpha/reflection.proto", googleapis-common-protos
registers "google/rpc/status.proto". So when one of those packages is
importable, its modules are used and the generated twin is never imported;
otherwise the generated module registers the standard file name
("grpc/health/v1/health.proto"), which anyone else compiling the standard
file registers identically. Either way one process can import phasor_client
and those packages, in any order.
"""

import importlib
import importlib.util
import types
from typing import Tuple

try:
    from ._proto import PROJECT_VERSION
    from ._proto.phasor.v1 import encoder_pb2, encoder_pb2_grpc
except ImportError as error:  # A source checkout nobody built.
    raise ImportError(
        "phasor_client has no generated stubs (phasor_client/_proto): "
        "install the package (pip install --no-build-isolation "
        "./client/python) or build CMake's phasor_python target and put "
        "build/python on PYTHONPATH; see docs/CLIENT.md") from error


def _first_importable(*names: str) -> types.ModuleType:
    """The first of the named modules whose package is installed."""
    for name in names[:-1]:
        top = name.split(".")[0]
        try:
            if importlib.util.find_spec(top) is None:
                continue
            return importlib.import_module(name)
        except ImportError:
            continue
    return importlib.import_module(names[-1])


def _pair(standard: str, generated: str) -> Tuple[types.ModuleType,
                                                  types.ModuleType]:
    """(messages, stubs) modules: grpcio's `standard` package if present,
    else this package's generated ones."""
    messages = _first_importable(f"{standard}_pb2",
                                 f"{__package__}._proto.{generated}_pb2")
    stubs = importlib.import_module(messages.__name__ + "_grpc")
    return messages, stubs


health_pb2, health_pb2_grpc = _pair("grpc_health.v1.health",
                                    "grpc.health.v1.health")
reflection_pb2, reflection_pb2_grpc = _pair(
    "grpc_reflection.v1alpha.reflection", "grpc.reflection.v1alpha.reflection")
status_pb2 = _first_importable("google.rpc.status_pb2",
                               f"{__package__}._proto.google.rpc.status_pb2")
error_details_pb2 = importlib.import_module(
    status_pb2.__name__.rsplit(".", 1)[0] + ".error_details_pb2")


def load() -> type:
    """The modules above as attributes of one namespace.

    Kept for callers of the former import-time generator (tensors.py, tests):
    it only returns what was imported at build time.
    """
    return type("Stubs", (), {
        "encoder_pb2": encoder_pb2,
        "encoder_pb2_grpc": encoder_pb2_grpc,
        "status_pb2": status_pb2,
        "error_details_pb2": error_details_pb2,
        "health_pb2": health_pb2,
        "health_pb2_grpc": health_pb2_grpc,
        "reflection_pb2": reflection_pb2,
        "reflection_pb2_grpc": reflection_pb2_grpc,
    })


__all__ = ["PROJECT_VERSION", "encoder_pb2", "encoder_pb2_grpc", "status_pb2",
           "error_details_pb2", "health_pb2", "health_pb2_grpc",
           "reflection_pb2", "reflection_pb2_grpc", "load"]
