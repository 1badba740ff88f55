# phasor-server container: a multi-stage build on Debian 12 (bookworm).
#
#   docker build -t phasor:0.1.0 .
#   (without Docker or a registry: deploy/container/build-image.sh)
#   docker run --rm -p 50051:50051 -p 9464:9464 phasor:0.1.0
#   docker run --rm -e PHASOR_MAX_MESSAGE_BYTES=16777216 ... phasor:0.1.0
#
# Every server flag has a PHASOR_* environment twin (server/flags.h); flags
# given after the image name are passed to phasor-server.

# ---- builder: the same dependency script a developer machine runs ---------
FROM debian:bookworm AS builder
WORKDIR /src
# Dependencies first, so editing sources does not reinstall packages.
COPY deploy/install-deps.sh deploy/install-deps.sh
RUN bash deploy/install-deps.sh && rm -rf /var/lib/apt/lists/*
COPY . .
# Portable Release binaries (PHASOR_NATIVE=OFF: no -march=native, the image
# may run on another CPU than the one that built it).
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release -DPHASOR_NATIVE=OFF \
        -DPHASOR_BUILD_SERVER=ON -DPHASOR_BUILD_TESTS=OFF \
        -DPHASOR_BUILD_BENCH=OFF \
    && cmake --build /build --target phasor-server phasor-client \
        -j"$(nproc)" \
    && strip /build/server/phasor-server /build/client/phasor-client

# ---- runtime: only the shared libraries the two binaries load --------------
FROM debian:bookworm-slim AS runtime
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        libgrpc++1.51 libprotobuf32 libabsl20220623 \
        libprometheus-cpp-pull1.0 libprometheus-cpp-core1.0 libgomp1 libhwy1 \
        libquadmath0 libtcmalloc-minimal4 \
        tzdata ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 phasor \
    && useradd --system --uid 10001 --gid 10001 --no-create-home \
        --home-dir /nonexistent --shell /usr/sbin/nologin phasor
COPY --from=builder /build/server/phasor-server /build/client/phasor-client \
    /usr/local/bin/
# The built-in holiday calendars, where phasor-server looks by default
# (../share/phasor/ from its binary; --builtin_holidays overrides).
COPY --from=builder /build/server/builtin_holidays.textpb /usr/local/share/phasor/

# Listen on all interfaces inside the container (the binary's defaults too).
ENV PHASOR_GRPC_ADDRESS=0.0.0.0:50051 \
    PHASOR_METRICS_ADDRESS=0.0.0.0:9464
# Numeric, so Kubernetes' runAsNonRoot can verify it without /etc/passwd.
USER 10001:10001
# gRPC, and Prometheus /metrics.
EXPOSE 50051 9464
# phasor-server drains on SIGTERM: health NOT_SERVING, then in-flight calls
# get --shutdown_grace_seconds to finish.
STOPSIGNAL SIGTERM
# For plain `docker run`; Kubernetes uses its native gRPC probes instead.
# (With TLS or a non-default port, override it with --health-cmd.)
# HEALTHCHECK exists only in the Docker image format: `docker build` keeps
# it; buildah and podman keep it with --format docker (OCI images have no
# such field), as deploy/container/build-image.sh builds.
HEALTHCHECK --interval=15s --timeout=5s --start-period=10s --retries=3 \
    CMD ["/usr/local/bin/phasor-client", "--target=127.0.0.1:50051", \
         "--deadline_ms=3000", "health"]
ENTRYPOINT ["/usr/local/bin/phasor-server"]
