"""Generates phasor_client/_proto: the protobuf/gRPC modules of the client.

Runs at BUILD time only, never at import: setup.py calls it from its
build_py step (so `pip install ./client/python` ships the modules in the
wheel), and the project's CMake calls it as a script to lay out an
importable copy of the package in the build tree for the tests:

    /usr/bin/python3 client/python/build_stubs.py --out build/python \\
        [--with-sources] [--proto-dir proto] [--grpc-proto-dir DIR]
        [--common-protos-jar JAR]

Compiler: protoc with grpc_python_plugin (Debian's protobuf-compiler and
protobuf-compiler-grpc), the same protoc that builds the C++ stubs, so the
generated code matches Debian's python3-protobuf runtime (3.21). Inputs:

  proto/phasor/v1/encoder.proto        the API (package phasor.v1)
  proto/inference/grpc_service.proto   the Open Inference Protocol (package
                                        inference), for the shared-memory
                                        calls (phasor_client/shm.py)
  <jar>:google/rpc/{status,error_details}.proto
                                        google.rpc.Status and its details,
                                        googleapis' complete files from
                                        Debian's libgoogle-common-protos-java
                                        (read from the jar, not copied)
  <grpc-proto>/grpc/health/v1/health.proto
  <grpc-proto>/grpc/reflection/v1alpha/reflection.proto
                                        the STANDARD files from Debian's
                                        grpc-proto, under their standard
                                        names (no renamed copies)

Layout: every module lands under phasor_client/_proto/ at the path protoc
gives it (phasor/v1/encoder_pb2.py, grpc/health/v1/health_pb2.py, ...), and
the generated absolute imports between them ("from phasor.v1 import
encoder_pb2") are rewritten to point inside the package. Why not put the
modules at the top level where protoc's imports expect them: a top-level
`grpc/health/...` would shadow grpcio's own `grpc` package and a top-level
`google/rpc` would collide with googleapis-common-protos; nesting them
keeps the package free of sys.path tricks. The descriptor pool is keyed
by .proto file name, not module name, so the nested modules register
exactly the standard names ("grpc/health/v1/health.proto"). Which modules
the client actually uses (its own or grpcio's grpc_health/grpc_reflection,
googleapis-common-protos' google.rpc) is decided in phasor_client/_stubs.py.

Environment overrides: PHASOR_PROTOC, PHASOR_GRPC_PYTHON_PLUGIN (compilers),
PHASOR_PROTO_DIR (directory holding phasor/v1/encoder.proto),
PHASOR_GRPC_PROTO_DIR (directory holding grpc/health/v1/health.proto),
PHASOR_COMMON_PROTOS_JAR (the googleapis common protos jar),
PHASOR_SERVICE_CONFIG (the clients' default service config, by default
client/service_config.json).

Package data: besides the stubs, the build copies client/service_config.json
into the package (copy_service_config), the one default service config the
C++, Python and Node clients share.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from typing import List, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = "phasor_client"
# Generated modules live in this subpackage of PACKAGE.
STUB_PACKAGE = "_proto"
# The clients' default service config (client/service_config.json), shipped
# in PACKAGE under this name.
SERVICE_CONFIG = "service_config.json"

# (include root key, proto path, has a service).
_API_PROTOS = ("phasor/v1/encoder.proto", "inference/grpc_service.proto")
_GOOGLEAPIS_PROTOS = ("google/rpc/status.proto",
                      "google/rpc/error_details.proto")
_STANDARD_PROTOS = ("grpc/health/v1/health.proto",
                    "grpc/reflection/v1alpha/reflection.proto")
_WITH_SERVICES = ("phasor/v1/encoder.proto", "inference/grpc_service.proto",
                  "grpc/health/v1/health.proto",
                  "grpc/reflection/v1alpha/reflection.proto")
# google/protobuf/any.proto (imported by google/rpc/status.proto) comes from
# Debian's libprotobuf-dev; its module is protobuf's own google.protobuf.
_WELL_KNOWN_INCLUDE = "/usr/include"
_DEFAULT_GRPC_PROTO_DIR = "/usr/share/grpc-proto"
_DEFAULT_COMMON_PROTOS_JAR = "/usr/share/java/proto-google-common-protos.jar"


class StubBuildError(RuntimeError):
    """The stubs could not be generated (missing compiler or .proto file)."""


def default_proto_dir() -> str:
    """The directory holding phasor/v1/encoder.proto.

    $PHASOR_PROTO_DIR, else the repository's proto/ (client/python/../../proto).
    """
    configured = os.environ.get("PHASOR_PROTO_DIR")
    if configured:
        return configured
    return os.path.normpath(os.path.join(HERE, "..", "..", "proto"))


def default_grpc_proto_dir() -> str:
    """The directory holding grpc/health/v1/health.proto (Debian grpc-proto)."""
    return os.environ.get("PHASOR_GRPC_PROTO_DIR", _DEFAULT_GRPC_PROTO_DIR)


def default_common_protos_jar() -> str:
    """The googleapis common protos jar (Debian:
    libgoogle-common-protos-java), which holds google/rpc/*.proto."""
    return os.environ.get("PHASOR_COMMON_PROTOS_JAR",
                          _DEFAULT_COMMON_PROTOS_JAR)


def _extract_googleapis(jar: str, include: str) -> None:
    """Writes google/rpc/{status,error_details}.proto from `jar` under
    `include`."""
    try:
        with zipfile.ZipFile(jar) as archive:
            for name in _GOOGLEAPIS_PROTOS:
                path = os.path.join(include, name)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "wb") as f:
                    f.write(archive.read(name))
    except (OSError, KeyError, zipfile.BadZipFile) as error:
        raise StubBuildError(
            f"{jar}: {error} (install Debian's libgoogle-common-protos-java "
            f"or set PHASOR_COMMON_PROTOS_JAR)") from error


def project_version(source_root: Optional[str] = None) -> str:
    """The version in the top-level CMakeLists.txt's project() call.

    One version for the server, the CLI and the Python package.
    """
    root = source_root or os.path.normpath(os.path.join(HERE, "..", ".."))
    path = os.path.join(root, "CMakeLists.txt")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as error:
        raise StubBuildError(f"{path}: {error}; the package builds from the "
                             f"Phasor source tree") from error
    match = re.search(r"project\(\s*phasor\s+VERSION\s+([0-9][0-9.]*)", text)
    if not match:
        raise StubBuildError(f"{path}: no 'project(phasor VERSION x.y.z'")
    return match.group(1)


def _tool(env_name: str, program: str) -> str:
    configured = os.environ.get(env_name)
    if configured:
        return configured
    found = shutil.which(program) or os.path.join("/usr/bin", program)
    if not os.path.exists(found):
        raise StubBuildError(
            f"{program} not found: install protobuf-compiler and "
            f"protobuf-compiler-grpc (deploy/install-deps.sh does), or set "
            f"{env_name}")
    return found


def _require(include: str, name: str, package_hint: str) -> None:
    if not os.path.isfile(os.path.join(include, name)):
        raise StubBuildError(f"{os.path.join(include, name)} not found "
                             f"({package_hint})")


def _module_name(proto: str) -> str:
    """"phasor/v1/encoder.proto" -> "phasor.v1.encoder_pb2"."""
    return proto[:-len(".proto")].replace("/", ".") + "_pb2"


def _rewrite_imports(text: str, generated: Sequence[str]) -> str:
    """Points protoc's absolute imports of generated modules into the package.

    protoc writes "from phasor.v1 import encoder_pb2 as ..."; only imports of
    modules generated here change (google.protobuf and grpc stay as they are).
    """
    prefix = f"{PACKAGE}.{STUB_PACKAGE}."

    def replace(match: "re.Match[str]") -> str:
        package, module = match.group(1), match.group(2)
        if f"{package}.{module}" not in generated:
            return match.group(0)
        return f"from {prefix}{package} import {module}"

    return re.sub(r"^from ([\w.]+) import (\w+)", replace, text,
                  flags=re.MULTILINE)


def generate(out_root: str, proto_dir: Optional[str] = None,
             grpc_proto_dir: Optional[str] = None,
             version: Optional[str] = None,
             common_protos_jar: Optional[str] = None) -> List[str]:
    """Writes <out_root>/phasor_client/_proto/... and returns the files.

    out_root is a directory on the import path of the built package (a
    setuptools build_lib, or the CMake build tree's python/ directory).
    Files are written only when their content changes, so a rebuild with
    unchanged protos leaves timestamps alone.
    """
    proto_dir = proto_dir or default_proto_dir()
    grpc_proto_dir = grpc_proto_dir or default_grpc_proto_dir()
    common_protos_jar = common_protos_jar or default_common_protos_jar()
    for name in _API_PROTOS:
        _require(proto_dir, name, "set PHASOR_PROTO_DIR to the directory "
                 "holding phasor/v1/; the package builds from the source tree")
    for name in _STANDARD_PROTOS:
        _require(grpc_proto_dir, name, "install Debian's grpc-proto or set "
                 "PHASOR_GRPC_PROTO_DIR")
    _require(_WELL_KNOWN_INCLUDE, "google/protobuf/any.proto",
             "install libprotobuf-dev")
    protoc = _tool("PHASOR_PROTOC", "protoc")
    plugin = _tool("PHASOR_GRPC_PYTHON_PLUGIN", "grpc_python_plugin")
    version = version or project_version()

    protos = list(_API_PROTOS) + list(_GOOGLEAPIS_PROTOS) + \
        list(_STANDARD_PROTOS)
    generated = [_module_name(p) for p in protos]
    generated += [_module_name(p) + "_grpc" for p in _WITH_SERVICES]
    stub_root = os.path.join(out_root, PACKAGE, STUB_PACKAGE)
    written = []
    with tempfile.TemporaryDirectory(prefix="phasor-stubs-") as scratch:
        googleapis = os.path.join(scratch, "googleapis")
        _extract_googleapis(common_protos_jar, googleapis)
        out = os.path.join(scratch, "out")
        os.makedirs(out)
        command = [protoc, f"--plugin=protoc-gen-grpc_python={plugin}",
                   f"--python_out={out}", f"--grpc_python_out={out}",
                   f"-I{proto_dir}", f"-I{googleapis}", f"-I{grpc_proto_dir}",
                   f"-I{_WELL_KNOWN_INCLUDE}", *protos]
        result = subprocess.run(command, capture_output=True, text=True,
                                timeout=300, check=False)
        if result.returncode != 0:
            raise StubBuildError(
                f"protoc failed: {' '.join(command)}\n{result.stderr}")
        files = {}
        for module in generated:
            relative = module.replace(".", "/") + ".py"
            with open(os.path.join(out, relative), encoding="utf-8") as f:
                files[relative] = _rewrite_imports(f.read(), generated)
    # Package markers for every directory on the way down.
    directories = {""}
    for relative in files:
        parts = relative.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            directories.add("/".join(parts[:depth]))
    for directory in sorted(directories):
        init = os.path.join(directory, "__init__.py") if directory \
            else "__init__.py"
        files.setdefault(init, "")
    files["__init__.py"] = (
        '"""Modules generated by client/python/build_stubs.py at build time;\n'
        'do not edit. Import them through phasor_client._stubs."""\n\n'
        f'PROJECT_VERSION = "{version}"\n')
    for relative, text in sorted(files.items()):
        path = os.path.join(stub_root, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        try:
            with open(path, encoding="utf-8") as f:
                unchanged = f.read() == text
        except OSError:
            unchanged = False
        if not unchanged:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        written.append(path)
    return written


def default_service_config() -> str:
    """client/service_config.json, the clients' default service config, or
    $PHASOR_SERVICE_CONFIG."""
    return os.environ.get("PHASOR_SERVICE_CONFIG") or os.path.normpath(
        os.path.join(HERE, "..", SERVICE_CONFIG))


def copy_service_config(out_root: str,
                        source: Optional[str] = None) -> str:
    """Copies the clients' default service config into
    <out_root>/phasor_client/ as package data (the module _channel.py loads
    it; the C++ and Node clients read the same file) and returns the copy's
    path. Written only when its content changes."""
    source = source or default_service_config()
    if not os.path.isfile(source):
        raise StubBuildError(
            f"{source} not found: the package builds from the source tree "
            f"(or set PHASOR_SERVICE_CONFIG)")
    with open(source, "rb") as f:
        data = f.read()
    target = os.path.join(out_root, PACKAGE, SERVICE_CONFIG)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    try:
        with open(target, "rb") as f:
            unchanged = f.read() == data
    except OSError:
        unchanged = False
    if not unchanged:
        with open(target, "wb") as f:
            f.write(data)
    return target


def copy_sources(out_root: str) -> List[str]:
    """Copies phasor_client/*.py (the hand-written package) to out_root,
    removing copies whose source is gone, and returns the copied files."""
    source = os.path.join(HERE, PACKAGE)
    target = os.path.join(out_root, PACKAGE)
    os.makedirs(target, exist_ok=True)
    names = sorted(n for n in os.listdir(source) if n.endswith(".py"))
    for stale in os.listdir(target):
        if stale.endswith(".py") and stale not in names:
            os.remove(os.path.join(target, stale))
    copied = []
    for name in names:
        shutil.copy2(os.path.join(source, name), os.path.join(target, name))
        copied.append(os.path.join(target, name))
    return copied


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Command line for CMake: see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True,
                        help="directory that will hold phasor_client/")
    parser.add_argument("--with-sources", action="store_true",
                        help="also copy the package's own .py files")
    parser.add_argument("--proto-dir", default=None)
    parser.add_argument("--grpc-proto-dir", default=None)
    parser.add_argument("--common-protos-jar", default=None)
    parser.add_argument("--stamp", default=None,
                        help="file to touch when done (for build systems)")
    args = parser.parse_args(argv)
    try:
        if args.with_sources:
            copy_sources(args.out)
        copy_service_config(args.out)
        generate(args.out, args.proto_dir, args.grpc_proto_dir,
                 common_protos_jar=args.common_protos_jar)
    except StubBuildError as error:
        print(f"build_stubs.py: {error}", file=sys.stderr)
        return 1
    if args.stamp:
        with open(args.stamp, "w", encoding="utf-8"):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
