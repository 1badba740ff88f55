"""EncoderClient's channel: message limits, the default service config, TLS,
the bearer token, the Encoder stub with zero-copy tensors, and the standard
services on the same channel (grpc.health.v1, server reflection).

open_channel() builds what EncoderClient.__init__ holds; the service
functions take the client and use its channel, deadline and metadata.

Thread-safety: a channel and its stubs may be shared by threads (grpc's
are); nothing here keeps state of its own.
"""

from __future__ import annotations

import functools
import importlib.resources
import os

import grpc

from . import _wire
from ._stubs import encoder_pb2 as pb
from ._stubs import encoder_pb2_grpc as _pb_grpc
from ._stubs import health_pb2 as _health
from ._stubs import health_pb2_grpc as _health_grpc
from ._stubs import reflection_pb2 as _reflection
from ._stubs import reflection_pb2_grpc as _reflection_grpc
from .errors import PhasorError

# phasor-server's default limit; PHASOR_MAX_MESSAGE_BYTES (which sets the
# server's) sets this default too.
DEFAULT_MESSAGE_BYTES = 64 << 20


# The channel's default service config: client/service_config.json, the
# file the C++ client embeds and the Node client reads too, shipped in this
# package (build_stubs.py copies it in; its settings and reasons:
# kDefaultServiceConfig in client/encoder_client.h, docs/DEPLOY.md). Encoder
# calls that fail with UNAVAILABLE or CANCELLED (a replica draining or gone)
# or RESOURCE_EXHAUSTED (a replica whose memory budget is in use; limits a
# retry cannot fix come marked not to be retried) are retried up to 5
# attempts with backoff, round_robin sending the retry to another replica;
# retries are throttled during an outage; with round_robin, each connection
# watches grpc.health.v1 for phasor.v1.Encoder so a draining replica stops
# receiving calls. gRPC uses it unless the name resolver supplies a service
# config. Format: gRPC's doc/service_config.md; retries: gRFC A6.
def _read_default_service_config():
    try:
        return importlib.resources.files(__package__).joinpath(
            "service_config.json").read_text(encoding="utf-8")
    except FileNotFoundError as error:  # A source checkout nobody built.
        raise ImportError(
            "phasor_client has no service_config.json: install the package "
            "(pip install --no-build-isolation ./client/python) or build "
            "CMake's phasor_python target; see docs/CLIENT.md") from error


DEFAULT_SERVICE_CONFIG = _read_default_service_config()


def default_message_bytes():
    """$PHASOR_MAX_MESSAGE_BYTES when set, else phasor-server's default."""
    value = os.environ.get("PHASOR_MAX_MESSAGE_BYTES")
    return int(value) if value else DEFAULT_MESSAGE_BYTES


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _token(token, token_file):
    """The bearer token: token_file's first line when given, else token."""
    if token_file:
        with open(token_file, encoding="utf-8") as f:
            token = f.readline().strip()
        if not token:
            raise ValueError(f"{token_file} holds no token")
    return token


def open_channel(target, *, max_message_bytes, tls, tls_ca, tls_cert,
                 tls_key, tls_server_name, token, token_file,
                 load_balancing_policy, channel_options, service_config):
    """(channel, call metadata, Encoder stub) for EncoderClient's arguments
    (see EncoderClient.__init__). The channel connects lazily."""
    options = [("grpc.max_send_message_length", max_message_bytes),
               ("grpc.max_receive_message_length", max_message_bytes)]
    if load_balancing_policy:
        options.append(("grpc.lb_policy_name", load_balancing_policy))
    if service_config:
        options.append(("grpc.service_config", service_config))
    if tls_server_name:
        options.append(("grpc.ssl_target_name_override", tls_server_name))
    options += list(channel_options)
    if tls or tls_ca or tls_cert or tls_key:
        if bool(tls_cert) != bool(tls_key):
            raise ValueError("give tls_cert and tls_key together")
        credentials = grpc.ssl_channel_credentials(
            root_certificates=_read(tls_ca) if tls_ca else None,
            private_key=_read(tls_key) if tls_key else None,
            certificate_chain=_read(tls_cert) if tls_cert else None)
        channel = grpc.secure_channel(target, credentials, options)
    else:
        channel = grpc.insecure_channel(target, options)
    token = _token(token, token_file)
    # Plain metadata rather than call credentials: gRPC sends call
    # credentials only over TLS, and loopback servers run plaintext.
    metadata = (("authorization", f"Bearer {token}"),) if token else ()
    stub = _pb_grpc.EncoderStub(channel)
    _detach_large_tensors(stub, channel)
    return channel, metadata, stub


# The methods whose replies carry tensors, and the shape of their call.
_TENSOR_REPLIES = (
    ("EncodePositions", "unary_unary", pb.EncodePositionsResponse),
    ("ApplyRope", "unary_unary", pb.ApplyRopeResponse),
    ("RopeTables", "unary_unary", pb.RopeTablesResponse),
    ("AlibiBias", "unary_unary", pb.AlibiBiasResponse),
    ("RelativeBias", "unary_unary", pb.RelativeBiasResponse),
    ("EncodeObservations", "unary_unary", pb.EncodeObservationsResponse),
    ("EncodeObservationsStream", "stream_stream",
     pb.EncodeObservationsResponse),
)


def _detach_large_tensors(stub, channel):
    """Rebinds the stub's tensor-carrying methods: their requests may be
    _wire.Outgoing, and their replies' large tensors are views of the
    received bytes, not copies (_wire.py)."""
    service = pb.DESCRIPTOR.services_by_name["Encoder"]
    for name, kind, response_class in _TENSOR_REPLIES:
        setattr(stub, name, getattr(channel, kind)(
            f"/{service.full_name}/{name}",
            request_serializer=_wire.serialize,
            response_deserializer=_wire.detaching(response_class, pb.Tensor)))


def serving_status_name(status):
    """"SERVING", "NOT_SERVING", ... for a HealthCheckResponse.status."""
    return _health.HealthCheckResponse.ServingStatus.Name(status)


def _raises_phasor_error(function):
    """Decorator for functions calling stubs directly: a grpc.RpcError
    leaves as PhasorError."""
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except grpc.RpcError as error:
            raise PhasorError.from_rpc_error(error) from None
    return wrapper


@_raises_phasor_error
def health(client, service):
    """EncoderClient.health."""
    stub = _health_grpc.HealthStub(client._channel)
    response = stub.Check(_health.HealthCheckRequest(service=service),
                          timeout=client.deadline_seconds)
    return serving_status_name(response.status)


def watch_health(client, service):
    """EncoderClient.watch_health."""
    stub = _health_grpc.HealthStub(client._channel)
    return stub.Watch(_health.HealthCheckRequest(service=service),
                      timeout=client.deadline_seconds)


@_raises_phasor_error
def list_services(client):
    """EncoderClient.list_services."""
    stub = _reflection_grpc.ServerReflectionStub(client._channel)
    request = _reflection.ServerReflectionRequest(list_services="*")
    for response in stub.ServerReflectionInfo(
            iter([request]), timeout=client.deadline_seconds):
        if response.HasField("error_response"):
            raise RuntimeError(response.error_response.error_message)
        return sorted(service.name for service in
                      response.list_services_response.service)
    return []


@_raises_phasor_error
def file_containing_symbol(client, symbol):
    """EncoderClient.file_containing_symbol."""
    stub = _reflection_grpc.ServerReflectionStub(client._channel)
    request = _reflection.ServerReflectionRequest(
        file_containing_symbol=symbol)
    for response in stub.ServerReflectionInfo(
            iter([request]), timeout=client.deadline_seconds):
        if response.HasField("error_response"):
            raise LookupError(response.error_response.error_message)
        return list(response.file_descriptor_response.file_descriptor_proto)
    return []
