"""EncoderClient: numpy in, numpy out, over phasor.v1.Encoder.

    from phasor_client import EncoderClient
    with EncoderClient("localhost:50051") as client:
        pe = client.encode_positions(count=128, dim=64)        # (128, 64) float32
        q, k, factor = client.apply_rope(query, key, rotary_dim=64)

Every call has a deadline (deadline_seconds, 30 s by default); a call that
overruns it raises grpc.RpcError with code DEADLINE_EXCEEDED. Server errors
raise grpc.RpcError whose details() name the offending field
("spec.positional.sinusoidal.dim: must be even"); field_violations() decodes
the google.rpc.BadRequest the server attaches.

Specs: each method takes shortcut keywords for the common settings, or
`spec=` (a phasor.v1 EncoderSpec message or its protobuf text format) for
everything the API offers, or `profile=` (a server-side profile name).

Thread-safety: an EncoderClient may be shared by threads (grpc channels are).
"""

import collections
import os

import grpc
import numpy as np
from google.protobuf import text_format

from . import _stubs
from .tensors import dtype_enum, from_tensor, to_tensor

_stubs_modules = _stubs.load()
pb = _stubs_modules.encoder_pb2
_pb_grpc = _stubs_modules.encoder_pb2_grpc
_health = _stubs_modules.health_pb2
_health_grpc = _stubs_modules.health_pb2_grpc
_reflection = _stubs_modules.reflection_pb2
_reflection_grpc = _stubs_modules.reflection_pb2_grpc
_status = _stubs_modules.status_pb2
_error_details = _stubs_modules.error_details_pb2

RopeResult = collections.namedtuple("RopeResult",
                                    ["query", "key", "attention_factor"])
RopeTables = collections.namedtuple(
    "RopeTables", ["cos", "sin", "attention_factor", "inv_freq"])
AlibiResult = collections.namedtuple("AlibiResult", ["slopes", "bias"])
Features = collections.namedtuple("Features", ["features", "schema", "state"])

# phasor-server's default limit; PHASOR_MAX_MESSAGE_BYTES (which sets the
# server's) sets this default too.
_DEFAULT_MESSAGE_BYTES = 64 << 20


def _default_message_bytes():
    value = os.environ.get("PHASOR_MAX_MESSAGE_BYTES")
    return int(value) if value else _DEFAULT_MESSAGE_BYTES


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def field_violations(error):
    """[(field, description)] from a grpc.RpcError's BadRequest detail."""
    trailers = error.trailing_metadata() or ()
    for key, value in trailers:
        if key != "grpc-status-details-bin":
            continue
        status = _status.Status.FromString(value)
        violations = []
        for detail in status.details:
            bad_request = _error_details.BadRequest()
            if detail.Unpack(bad_request):
                violations += [(v.field, v.description)
                               for v in bad_request.field_violations]
        return violations
    return []


def _positions(positions, count, start, step):
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


def _spec(spec):
    """An EncoderSpec from a message or its text format."""
    if isinstance(spec, str):
        return text_format.Parse(spec, pb.EncoderSpec())
    return spec


def _set_config(request, profile, spec, shortcut):
    """Fills the request's config oneof: profile, spec, or shortcut()."""
    if profile:
        request.profile = profile
    elif spec is not None:
        request.spec.CopyFrom(_spec(spec))
    else:
        request.spec.CopyFrom(shortcut())


def _no_shortcut():
    raise ValueError("give spec= or profile=")


def serving_status_name(status):
    """"SERVING", "NOT_SERVING", ... for a HealthCheckResponse.status."""
    return _health.HealthCheckResponse.ServingStatus.Name(status)


def _enum(enum_type, name):
    """An enum value from its name, case-insensitively (None = unset)."""
    if name is None:
        return 0
    if isinstance(name, int):
        return name
    return enum_type.Value(name.upper())


def _rope_spec(rotary_dim, base, layout, scaling, fold_attention_factor,
               max_position_embeddings, seq_len):
    rope = pb.RopeSpec(rotary_dim=rotary_dim,
                       layout=_enum(pb.RopeSpec.Layout, layout),
                       max_position_embeddings=max_position_embeddings,
                       seq_len=seq_len)
    if base is not None:
        rope.base = base
    if fold_attention_factor is not None:
        rope.fold_attention_factor = fold_attention_factor
    if scaling is not None:
        # A RopeScaling message, its text format, or {"yarn": {"factor": 4}}.
        if isinstance(scaling, str):
            text_format.Parse(scaling, rope.scaling)
        elif isinstance(scaling, dict):
            for kind, parameters in scaling.items():
                getattr(rope.scaling, kind).SetInParent()
                for name, value in parameters.items():
                    setattr(getattr(rope.scaling, kind), name, value)
        else:
            rope.scaling.CopyFrom(scaling)
    return pb.EncoderSpec(rope=rope)


class EncoderClient:
    """A client for phasor.v1.Encoder. See the module docstring."""

    def __init__(self, target="localhost:50051", *, deadline_seconds=30.0,
                 max_message_bytes=None, tls=False,
                 tls_ca=None, tls_cert=None, tls_key=None,
                 tls_server_name=None, token=None, token_file=None,
                 load_balancing_policy=None, channel_options=()):
        """Opens a channel to `target` (connects lazily).

        TLS is on when `tls` or any tls_* path is given: tls_ca verifies the
        server (system roots otherwise); tls_cert + tls_key answer a server
        that requires mutual TLS. `token`/`token_file` send
        "authorization: Bearer <token>" on every Encoder call.
        max_message_bytes bounds both directions: by default 64 MiB, as
        phasor-server's, or $PHASOR_MAX_MESSAGE_BYTES when set.
        For a Kubernetes headless Service use target "dns:///name:50051" with
        load_balancing_policy="round_robin". channel_options: further gRPC
        channel arguments as (name, value) pairs.
        """
        if deadline_seconds <= 0:
            raise ValueError("deadline_seconds must be positive")
        self.deadline_seconds = deadline_seconds
        if max_message_bytes is None:
            max_message_bytes = _default_message_bytes()
        options = [("grpc.max_send_message_length", max_message_bytes),
                   ("grpc.max_receive_message_length", max_message_bytes)]
        if load_balancing_policy:
            options.append(("grpc.lb_policy_name", load_balancing_policy))
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
            self._channel = grpc.secure_channel(target, credentials, options)
        else:
            self._channel = grpc.insecure_channel(target, options)
        if token_file:
            with open(token_file, encoding="utf-8") as f:
                token = f.readline().strip()
            if not token:
                raise ValueError(f"{token_file} holds no token")
        # Plain metadata rather than call credentials: gRPC sends call
        # credentials only over TLS, and loopback servers run plaintext.
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self._stub = _pb_grpc.EncoderStub(self._channel)

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def _call(self, method, request):
        return method(request, timeout=self.deadline_seconds,
                      metadata=self._metadata)

    def encode_positions(self, positions=None, *, count=None, start=0, step=1,
                         dim=None, base=None, layout=None, frequencies=None,
                         learned_table=None, profile=None, spec=None,
                         content=None, content_scale=None,
                         output_dtype="float32"):
        """Encodings [N, dim] = content·content_scale + PE.

        positions: array of N integers (token indices) or reals; or
        count/start/step for a range. dim/base/layout ("interleaved",
        "split_sin_cos", "split_cos_sin")/frequencies ("vaswani",
        "tensor2tensor") select sinusoids; learned_table a server table.
        """
        request = pb.EncodePositionsRequest(
            positions=_positions(positions, count, start, step),
            output_dtype=dtype_enum(output_dtype))

        def shortcut():
            if learned_table:
                return pb.EncoderSpec(positional=pb.PositionalSpec(
                    learned=pb.LearnedSpec(table=learned_table)))
            if dim is None:
                raise ValueError("give dim=, learned_table=, spec= or profile=")
            sinusoidal = pb.SinusoidalSpec(
                dim=dim, layout=_enum(pb.SinusoidalSpec.Layout, layout),
                frequencies=_enum(pb.SinusoidalSpec.Frequencies, frequencies))
            if base is not None:
                sinusoidal.base = base
            return pb.EncoderSpec(
                positional=pb.PositionalSpec(sinusoidal=sinusoidal))

        _set_config(request, profile, spec, shortcut)
        if content is not None:
            request.content.CopyFrom(to_tensor(content, "float32"))
        if content_scale is not None:
            request.content_scale = content_scale
        response = self._call(self._stub.EncodePositions, request)
        return from_tensor(response.encodings)

    def apply_rope(self, query, key=None, positions=None, *, rotary_dim=0,
                   base=None, layout=None, scaling=None,
                   fold_attention_factor=None, max_position_embeddings=0,
                   seq_len=0, profile=None, spec=None, dtype=None):
        """Rotates query [T, H, D] (and key [T, Hkv, D]) with RoPE.

        positions default to 0..T-1; reals give continuous-time RoPE. dtype
        ("float32", "float16", "bfloat16") is the wire and output dtype,
        default the query's if it is one of those, else float32.
        scaling: a RopeScaling message, its text format, or a dict such as
        {"yarn": {"factor": 4.0, "original_max_position_embeddings": 4096}}.
        Returns (query, key or None, attention_factor).
        """
        query = np.asarray(query)
        if dtype is None:
            dtype = query.dtype if query.dtype in (np.float32, np.float16) \
                else np.float32
        if positions is None:
            positions = np.arange(query.shape[0], dtype=np.int64)
        request = pb.ApplyRopeRequest(
            query=to_tensor(query, dtype),
            positions=_positions(positions, None, 0, 1))
        if key is not None:
            request.key.CopyFrom(to_tensor(key, dtype))
        _set_config(request, profile, spec, lambda: _rope_spec(
            rotary_dim, base, layout, scaling, fold_attention_factor,
            max_position_embeddings, seq_len))
        response = self._call(self._stub.ApplyRope, request)
        return RopeResult(
            from_tensor(response.query),
            from_tensor(response.key) if response.HasField("key") else None,
            response.attention_factor)

    def rope_tables(self, positions=None, *, count=None, start=0, step=1,
                    rotary_dim=0, base=None, layout=None, scaling=None,
                    fold_attention_factor=None, max_position_embeddings=0,
                    seq_len=0, profile=None, spec=None,
                    output_dtype="float32"):
        """cos, sin [N, rotary_dim/2], attention_factor and inv_freq."""
        request = pb.RopeTablesRequest(
            positions=_positions(positions, count, start, step),
            output_dtype=dtype_enum(output_dtype))
        _set_config(request, profile, spec, lambda: _rope_spec(
            rotary_dim, base, layout, scaling, fold_attention_factor,
            max_position_embeddings, seq_len))
        response = self._call(self._stub.RopeTables, request)
        return RopeTables(from_tensor(response.cos), from_tensor(response.sin),
                          response.attention_factor, list(response.inv_freq))

    def alibi(self, num_heads, q_len=0, k_len=0, *, causal=False,
              output_dtype="float32"):
        """ALiBi slopes [H] and, when q_len and k_len are given, bias
        [H, q_len, k_len]."""
        request = pb.AlibiBiasRequest(num_heads=num_heads, q_len=q_len,
                                      k_len=k_len, causal=causal,
                                      output_dtype=dtype_enum(output_dtype))
        response = self._call(self._stub.AlibiBias, request)
        bias = from_tensor(response.bias) if response.HasField("bias") else None
        return AlibiResult(from_tensor(response.slopes), bias)

    @staticmethod
    def _observations(timestamps, values, mask, content, channel_names):
        observations = pb.Observations(channel_names=channel_names or [])
        observations.timestamps.CopyFrom(to_tensor(timestamps, "int64"))
        values = np.asarray(values)
        if values.ndim == 1:
            values = values[:, None]
        observations.values.CopyFrom(to_tensor(
            values, values.dtype if values.dtype == np.float32 else "float64"))
        if mask is not None:
            observations.mask.CopyFrom(to_tensor(mask, "uint8"))
        if content is not None:
            observations.content.CopyFrom(to_tensor(content, "float32"))
        return observations

    def encode_observations(self, timestamps, values, mask=None, *,
                            spec=None, profile=None, state=None,
                            content=None, channel_names=None,
                            output_dtype="float32"):
        """Features [T, F] of wide observations.

        timestamps: int64 ns since the Unix epoch [T] (numpy datetime64[ns]
        arrays work via .astype("int64")); values [T, C] with NaN = missing.
        spec: an EncoderSpec with `temporal`, a TemporalSpec, or text format
        ("temporal { time { dim: 8 ... } }"). Returns (features, schema,
        state); pass state back to continue the series in a later call.
        """
        request = pb.EncodeObservationsRequest(
            observations=self._observations(timestamps, values, mask, content,
                                             channel_names),
            output_dtype=dtype_enum(output_dtype))
        if isinstance(spec, pb.TemporalSpec):
            spec = pb.EncoderSpec(temporal=spec)
        _set_config(request, profile, spec, _no_shortcut)
        if state is not None:
            request.state.CopyFrom(state)
        response = self._call(self._stub.EncodeObservations, request)
        return Features(from_tensor(response.features), list(response.schema),
                        response.state)

    def encode_observations_stream(self, chunks, *, spec=None, profile=None,
                                   output_dtype="float32"):
        """Yields Features per chunk of one series, sent over one stream.

        chunks: an iterable of (timestamps, values) or (timestamps, values,
        mask) tuples, in time order. The deadline covers the whole stream.
        """
        if isinstance(spec, pb.TemporalSpec):
            spec = pb.EncoderSpec(temporal=spec)

        def requests():
            for index, chunk in enumerate(chunks):
                timestamps, values = chunk[0], chunk[1]
                mask = chunk[2] if len(chunk) > 2 else None
                request = pb.EncodeObservationsRequest(
                    observations=self._observations(timestamps, values, mask,
                                                     None, None),
                    output_dtype=dtype_enum(output_dtype))
                if index == 0:
                    _set_config(request, profile, spec, _no_shortcut)
                yield request

        responses = self._stub.EncodeObservationsStream(
            requests(), timeout=self.deadline_seconds, metadata=self._metadata)
        for response in responses:
            yield Features(from_tensor(response.features),
                           list(response.schema), response.state)

    def describe(self, *, dim=None, rotary_dim=None, base=None, spec=None,
                 profile=None, num_offsets=0, offset_step=None):
        """The DescribeResponse: frequencies, wavelengths, unambiguous range,
        nearest-code distance and the similarity curve."""
        request = pb.DescribeRequest(num_offsets=num_offsets)
        if offset_step is not None:
            request.offset_step = offset_step

        def shortcut():
            if rotary_dim:
                return _rope_spec(rotary_dim, base, None, None, None, 0, 0)
            if not dim:
                raise ValueError("give dim=, rotary_dim=, spec= or profile=")
            sinusoidal = pb.SinusoidalSpec(dim=dim)
            if base is not None:
                sinusoidal.base = base
            return pb.EncoderSpec(
                positional=pb.PositionalSpec(sinusoidal=sinusoidal))

        _set_config(request, profile, spec, shortcut)
        return self._call(self._stub.Describe, request)

    def list_profiles(self):
        """The server's profiles (phasor.v1.ProfileInfo messages)."""
        return list(self._call(self._stub.ListProfiles,
                               pb.ListProfilesRequest()).profiles)

    def echo(self, payload):
        """The payload back; needs a server started with --enable_echo."""
        return self._call(self._stub.Echo,
                          pb.EchoRequest(payload=payload)).payload

    def health(self, service=""):
        """"SERVING", "NOT_SERVING", ... for the server ("") or a service."""
        stub = _health_grpc.HealthStub(self._channel)
        response = stub.Check(_health.HealthCheckRequest(service=service),
                              timeout=self.deadline_seconds)
        return serving_status_name(response.status)

    def watch_health(self, service=""):
        """The grpc.health.v1 Watch call: iterates over HealthCheckResponse
        messages (serving_status_name(r.status)) as the status changes.

        The call is bounded by the client's deadline; its cancel() ends the
        watch early.
        """
        stub = _health_grpc.HealthStub(self._channel)
        return stub.Watch(_health.HealthCheckRequest(service=service),
                          timeout=self.deadline_seconds)

    def list_services(self):
        """Service names the server registers, via gRPC server reflection."""
        stub = _reflection_grpc.ServerReflectionStub(self._channel)
        request = _reflection.ServerReflectionRequest(list_services="*")
        for response in stub.ServerReflectionInfo(
                iter([request]), timeout=self.deadline_seconds):
            if response.HasField("error_response"):
                raise RuntimeError(response.error_response.error_message)
            return sorted(service.name for service in
                          response.list_services_response.service)
        return []

    def file_containing_symbol(self, symbol):
        """Serialized FileDescriptorProtos declaring `symbol`, via
        reflection (e.g. "phasor.v1.Encoder")."""
        stub = _reflection_grpc.ServerReflectionStub(self._channel)
        request = _reflection.ServerReflectionRequest(
            file_containing_symbol=symbol)
        for response in stub.ServerReflectionInfo(
                iter([request]), timeout=self.deadline_seconds):
            if response.HasField("error_response"):
                raise LookupError(response.error_response.error_message)
            return list(response.file_descriptor_response.file_descriptor_proto)
        return []
