"""Generated protobuf/gRPC modules for the Phasor API, built on first use.

The stubs are not committed: on first import, protoc and grpc_python_plugin
(Debian's protobuf-compiler and protobuf-compiler-grpc) compile
proto/phasor/v1/encoder.proto, the google.rpc error-detail messages next to
it, and the health and reflection protocols in ./protos into a cache
directory keyed by a hash of the .proto files, so an API change rebuilds them
and an unchanged API reuses them.

Where things are looked up:
  PHASOR_PROTO_DIR     directory holding phasor/v1/encoder.proto
                       (default: the repository's proto/ next to client/)
  PHASOR_PY_STUBS_DIR  cache root (default: $XDG_CACHE_HOME/phasor/py-stubs,
                       else ~/.cache/phasor/py-stubs, else the temp dir)
  PHASOR_PROTOC, PHASOR_GRPC_PYTHON_PLUGIN  the two compilers (default: PATH,
                       then /usr/bin)

Concurrent first runs are safe: each compiles into a private directory and
renames it into place; the loser of the race discards its copy.
"""

import hashlib
import importlib
import os
import shutil
import subprocess
import sys
import tempfile

_HERE = os.path.dirname(os.path.abspath(__file__))
_OWN_PROTOS = os.path.join(_HERE, "protos")
_API_FILES = (
    "phasor/v1/encoder.proto",
    "google/rpc/status.proto",
    "google/rpc/error_details.proto",
)
_OWN_FILES = ("grpc_health_v1.proto", "grpc_reflection_v1alpha.proto")
# Where Debian's libprotobuf-dev puts google/protobuf/*.proto (any.proto is
# imported by google/rpc/status.proto).
_WELL_KNOWN_INCLUDE = "/usr/include"


class StubError(RuntimeError):
    """The stubs could not be generated (missing compiler or .proto files)."""


def _proto_dir():
    configured = os.environ.get("PHASOR_PROTO_DIR")
    if configured:
        return configured
    # client/python/phasor_client -> repository root.
    return os.path.normpath(os.path.join(_HERE, "..", "..", "..", "proto"))


def _cache_root():
    configured = os.environ.get("PHASOR_PY_STUBS_DIR")
    if configured:
        return configured
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(
        os.path.expanduser("~"), ".cache")
    return os.path.join(base, "phasor", "py-stubs")


def _tool(env_name, program):
    configured = os.environ.get(env_name)
    if configured:
        return configured
    found = shutil.which(program) or os.path.join("/usr/bin", program)
    if not os.path.exists(found):
        raise StubError(
            f"{program} not found: install protobuf-compiler and "
            f"protobuf-compiler-grpc (deploy/install-deps.sh does), or set "
            f"{env_name}")
    return found


def _sources():
    """(include_dir, relative_path) of every .proto to compile."""
    proto_dir = _proto_dir()
    sources = [(proto_dir, name) for name in _API_FILES]
    sources += [(_OWN_PROTOS, name) for name in _OWN_FILES]
    for include, name in sources:
        if not os.path.isfile(os.path.join(include, name)):
            raise StubError(
                f"{os.path.join(include, name)} not found; set "
                f"PHASOR_PROTO_DIR to the directory holding phasor/v1/")
    return sources


def _fingerprint(sources):
    digest = hashlib.sha256()
    for include, name in sources:
        digest.update(name.encode())
        with open(os.path.join(include, name), "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()[:16]


def _compile(sources, target):
    protoc = _tool("PHASOR_PROTOC", "protoc")
    plugin = _tool("PHASOR_GRPC_PYTHON_PLUGIN", "grpc_python_plugin")
    includes = []
    for include, _ in sources:
        if include not in includes:
            includes.append(include)
    includes.append(_WELL_KNOWN_INCLUDE)
    command = [protoc, f"--plugin=protoc-gen-grpc_python={plugin}",
               f"--python_out={target}", f"--grpc_python_out={target}"]
    command += [f"-I{include}" for include in includes]
    command += [name for _, name in sources]
    result = subprocess.run(command, capture_output=True, text=True,
                            timeout=120, check=False)
    if result.returncode != 0:
        raise StubError(f"protoc failed: {' '.join(command)}\n{result.stderr}")


def stub_dir():
    """The directory holding the generated modules, generating it if needed."""
    sources = _sources()
    root = _cache_root()
    try:
        os.makedirs(root, exist_ok=True)
    except OSError:
        root = os.path.join(tempfile.gettempdir(), "phasor-py-stubs")
        os.makedirs(root, exist_ok=True)
    final = os.path.join(root, _fingerprint(sources))
    if os.path.isdir(final):
        return final
    scratch = tempfile.mkdtemp(prefix=".build-", dir=root)
    try:
        _compile(sources, scratch)
        try:
            os.rename(scratch, final)
        except OSError:
            if not os.path.isdir(final):  # Not a lost race: a real failure.
                raise
    finally:
        if os.path.isdir(scratch):
            shutil.rmtree(scratch, ignore_errors=True)
    return final


def load():
    """Imports and returns the generated modules as a namespace."""
    directory = stub_dir()
    if directory not in sys.path:
        sys.path.insert(0, directory)
    importlib.invalidate_caches()
    names = {
        "encoder_pb2": "phasor.v1.encoder_pb2",
        "encoder_pb2_grpc": "phasor.v1.encoder_pb2_grpc",
        "status_pb2": "google.rpc.status_pb2",
        "error_details_pb2": "google.rpc.error_details_pb2",
        "health_pb2": "grpc_health_v1_pb2",
        "health_pb2_grpc": "grpc_health_v1_pb2_grpc",
        "reflection_pb2": "grpc_reflection_v1alpha_pb2",
        "reflection_pb2_grpc": "grpc_reflection_v1alpha_pb2_grpc",
    }
    modules = {key: importlib.import_module(name) for key, name in names.items()}
    return type("Stubs", (), modules)
