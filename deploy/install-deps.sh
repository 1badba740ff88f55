#!/usr/bin/env bash
# Installs every Debian 12 package Phasor needs to build, test and run.
# Idempotent: when everything is present it only checks and returns.
# Used by the README's commands and by the Dockerfile's builder stage.
#
#   bash deploy/install-deps.sh          build and run (the Docker builder)
#   bash deploy/install-deps.sh --test   also clang-14 and libFuzzer, for the
#                                        sanitizer and fuzz tree of .ci/run,
#                                        python3-torch for the Python tests,
#                                        Node.js/npm, Go and Java for the
#                                        client/node, client/go and Java
#                                        example tests
set -euo pipefail

packages=(
  build-essential cmake pkg-config ca-certificates
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler grpc-proto
  # googleapis' google/rpc/{status,error_details}.proto, complete and under
  # their standard names, read from this jar (proto/CMakeLists.txt); no Java
  # runtime is needed or installed.
  libgoogle-common-protos-java
  libabsl-dev prometheus-cpp-dev libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libhwy-dev
  # tcmalloc (gperftools' minimal build), the malloc phasor-server and the
  # C++ client programs link: large messages reuse freed memory instead of
  # a fresh mmap and its page faults per call (CMakeLists.txt,
  # PHASOR_ALLOCATOR; docs/BENCHMARKS.md).
  libgoogle-perftools-dev
  tzdata openssl libssl-dev curl
  python3 python3-numpy python3-grpcio python3-protobuf python3-yaml
  # The Python package: built offline by Debian's pip/setuptools/wheel
  # (client/python/pyproject.toml), installed into venvs by the tests; its
  # stubs come from protoc + grpc_python_plugin (protobuf-compiler-grpc,
  # above) and grpc-proto's standard health/reflection protos. Debian 12 has
  # no python3-grpcio-health-checking, and python3-grpc-tools (1.14) is
  # older than the grpcio it would generate for, so neither is used.
  python3-pip python3-venv python3-setuptools python3-wheel
  # The package's DataFrame API (encode_frame, DatetimeIndex timestamps).
  python3-pandas
  # phasor_client.dask: encode_frame over a Dask DataFrame on a
  # dask.distributed cluster (docs/DASK.md), and its e2e test's LocalCluster.
  # Debian 12 has no pyarrow or fastparquet: read_parquet needs one of them
  # from elsewhere.
  python3-dask python3-distributed
  # The built-in country holiday calendars, generated at build time by
  # server/holidays/gen_builtin_holidays.py (python3-holidays 0.10.1), and
  # the test that compares them with the library.
  python3-holidays
  # docs/pictures/draw.py, which draws the docs' figures from a running
  # server, and its e2e test (e2e_pictures), part of every ctest run.
  python3-matplotlib
)
case "${1:-}" in
  "") ;;
  --test)
    # clang's OpenMP (libomp), sanitizer runtimes and libFuzzer.
    packages+=(clang-14 libclang-rt-14-dev libomp-14-dev libfuzzer-14-dev)
    # The Python client's torch tensors (apply_rope's bf16 tests and docs).
    packages+=(python3-torch)
    # The container test (tests/e2e/test_container.py): debootstrap makes
    # the debian:bookworm base, buildah builds the Dockerfile without a
    # Docker engine or a registry (deploy/container/build-image.sh).
    packages+=(debootstrap buildah)
    # buf, from npm (tests/api/package.json, pinned by its lock file), for
    # the API checks: npm ci --prefix tests/api (nodejs and npm: below).
    # client/node (npm ci from its lock file) and client/go, built offline
    # in GOPATH mode from Debian's Go library sources (/usr/share/gocode).
    # golang-google-grpc-dev accepts golang/protobuf 1.3 or 1.5; the stubs
    # protoc-gen-go 1.28 writes need 1.5 (with 1.3 grpc's codec dereferences
    # nil on any oneof), so it is named here.
    packages+=(nodejs golang-go golang-google-grpc-dev golang-google-protobuf-dev
               golang-github-golang-protobuf-1-5-dev golang-google-genproto-dev
               protoc-gen-go protoc-gen-go-grpc)
    # The Java example (tests/e2e/java): Debian's grpc-java 1.41 with its
    # netty transport and the jars it loads, protoc's Java plugin, a JDK.
    packages+=(default-jdk-headless libgrpc-java libprotobuf-java
               protobuf-compiler-grpc-java-plugin libnetty-java
               libperfmark-java libgoogle-gson-java libguava-java
               libopencensus-java libjsr305-java liberror-prone-java
               libgeronimo-annotation-1.3-spec-java)
    # Debian's npm, unless an npm is already there: NodeSource's nodejs
    # package bundles one and conflicts with Debian's.
    if ! command -v npm >/dev/null 2>&1; then
      packages+=(npm)
    fi
    # --- Operations tests: promtool and prometheus (Debian's prometheus
    # package ships both) check deploy/prometheus and the dashboard and run a
    # real Prometheus against a test server; git gives the binaries' version
    # its revision; Node.js and npm validate deploy/k8s against the
    # Kubernetes JSON schemas (npm ci of tests/e2e/k8s_schema's lock file).
    # (nodejs and npm: above.)
    packages+=(prometheus git)
    ;;
  *) echo "usage: $0 [--test]" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y --no-install-recommends "${missing[@]}"
fi
