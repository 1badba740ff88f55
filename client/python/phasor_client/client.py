"""EncoderClient: numpy in, numpy out, over phasor.v1.Encoder.

    from phasor_client import EncoderClient
    with EncoderClient("localhost:50051") as client:
        pe = client.encode_positions(count=128, dim=64)        # (128, 64) float32
        q, k, factor = client.apply_rope(query, key, rotary_dim=64)

Every call has a deadline (deadline_seconds, 30 s by default); a call that
overruns it raises PhasorError with code DEADLINE_EXCEEDED. Server errors
raise PhasorError (a grpc.RpcError, see errors.py) whose details() name the
offending field ("spec.positional.sinusoidal.dim: must be even") and whose
field_violations() decodes the google.rpc.BadRequest the server attaches;
input refused before sending raises InvalidInputError, a PhasorError.

Specs: each method takes shortcut keywords for the common settings (the
temporal methods take the blocks themselves: time=, gaps=, calendar=, ...),
or `spec=` (a phasor.v1 EncoderSpec message, its protobuf text format, or a
dict with case-insensitive enum names, see specs.py) for everything the API
offers, or `profile=` (a server-side profile name).

Times: see times.py; pandas DataFrames: encode_frame and frame.py.

Thread-safety: an EncoderClient may be shared by threads (grpc channels are).
"""

from __future__ import annotations

import collections
import functools
import importlib.resources
import os
import threading
from typing import (TYPE_CHECKING, Any, Hashable, Iterable, Iterator, List,
                    Mapping, Optional, Sequence, Tuple, Union)

import grpc
import numpy as np
import numpy.typing as npt
from google.protobuf import message as _message

from . import _panel, _rope, _wire
from ._stubs import encoder_pb2 as pb
from ._stubs import encoder_pb2_grpc as _pb_grpc
from ._stubs import error_details_pb2 as _error_details
from ._stubs import health_pb2 as _health
from ._stubs import health_pb2_grpc as _health_grpc
from ._stubs import reflection_pb2 as _reflection
from ._stubs import reflection_pb2_grpc as _reflection_grpc
from ._stubs import status_pb2 as _status
from .tensors import DTypeLike, attach, dtype_enum, from_tensor, to_tensor
from . import frame as _frame, specs as _specs
from .errors import InvalidInputError, PhasorError, bad_request_violations
from .specs import SpecLike
from .times import read_times

if TYPE_CHECKING:  # pandas is optional (the "pandas" extra).
    import pandas as pd

# The annotations' vocabulary. ArrayLike: anything np.asarray takes (numpy
# arrays, lists, pandas Series/Index); timestamps also take what times.py
# reads. A temporal block (time=, gaps=, calendar=, ...): a dict, True for
# the defaults, its text format or its message (see specs.py). An enum
# (layout=, frequencies=, combine=): its name, case-insensitively, or value.
ArrayLike = npt.ArrayLike
BlockLike = Union[None, bool, str, Mapping[str, Any], _message.Message]
EnumLike = Union[None, str, int]
PathLike = Union[str, "os.PathLike[str]"]

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

# Bytes per output element for EncodeObservationsRequest.output_dtype.
_OUTPUT_ITEMSIZE = {pb.DTYPE_UNSPECIFIED: 4, pb.FLOAT32: 4, pb.FLOAT16: 2,
                    pb.BFLOAT16: 2, pb.FLOAT64: 8}


def _content_dtype(content, output_dtype):
    """The wire dtype of observation content embeddings: float16 as sent,
    float64 as sent when the output is float64 too (the server then scales
    it in double), otherwise float32."""
    if content.dtype == np.float16:
        return np.float16
    if content.dtype == np.float64 and dtype_enum(output_dtype) == pb.FLOAT64:
        return np.float64
    return np.float32

# phasor-server's default limit; PHASOR_MAX_MESSAGE_BYTES (which sets the
# server's) sets this default too.
_DEFAULT_MESSAGE_BYTES = 64 << 20


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


def _default_message_bytes():
    value = os.environ.get("PHASOR_MAX_MESSAGE_BYTES")
    return int(value) if value else _DEFAULT_MESSAGE_BYTES


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def field_violations(error: grpc.RpcError) -> List[Tuple[str, str]]:
    """[(field, description)] from a grpc.RpcError's BadRequest detail
    (PhasorError.field_violations() says the same)."""
    if isinstance(error, PhasorError):
        return error.field_violations()
    return bad_request_violations(error.trailing_metadata())


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
    """An EncoderSpec from a message (EncoderSpec or the Temporal /
    Positional / Rope spec inside), its text format, or a dict
    (specs.encoder_spec)."""
    return _specs.encoder_spec(spec)


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


def serving_status_name(status: int) -> str:
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
    """The RoPE methods' keywords as an EncoderSpec, checked as spec= is
    (specs.rope_config)."""
    return _specs.rope_config(rotary_dim, base, layout, scaling,
                              fold_attention_factor, max_position_embeddings,
                              seq_len)


def _raises_phasor_error(method):
    """Decorator for methods calling stubs directly: a grpc.RpcError
    leaves as PhasorError."""
    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except grpc.RpcError as error:
            raise PhasorError.from_rpc_error(error) from None
    return wrapper


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


def _detach_large_tensors(stub: Any, channel: grpc.Channel) -> None:
    """Rebinds the stub's tensor-carrying methods: their requests may be
    _wire.Outgoing, and their replies' large tensors are views of the
    received bytes, not copies (_wire.py)."""
    service = pb.DESCRIPTOR.services_by_name["Encoder"]
    for name, kind, response_class in _TENSOR_REPLIES:
        setattr(stub, name, getattr(channel, kind)(
            f"/{service.full_name}/{name}",
            request_serializer=_wire.serialize,
            response_deserializer=_wire.detaching(response_class, pb.Tensor)))


class EncoderClient:
    """A client for phasor.v1.Encoder. See the module docstring."""

    def __init__(self, target: str = "localhost:50051", *,
                 deadline_seconds: float = 30.0,
                 max_message_bytes: Optional[int] = None, tls: bool = False,
                 tls_ca: Optional[PathLike] = None,
                 tls_cert: Optional[PathLike] = None,
                 tls_key: Optional[PathLike] = None,
                 tls_server_name: Optional[str] = None,
                 token: Optional[str] = None,
                 token_file: Optional[PathLike] = None,
                 load_balancing_policy: Optional[str] = None,
                 channel_options: Sequence[Tuple[str, Any]] = (),
                 service_config: Optional[str] = DEFAULT_SERVICE_CONFIG
                 ) -> None:
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
        service_config: the channel's default service config (JSON); the
        default, DEFAULT_SERVICE_CONFIG, retries calls that fail with
        UNAVAILABLE or CANCELLED (a replica shutting down) on another replica, so losing a replica loses no call.
        None = no service config (no retry policy; gRPC's transparent
        retries of calls that never reached a server remain).
        """
        if deadline_seconds <= 0:
            raise ValueError("deadline_seconds must be positive")
        self.deadline_seconds = deadline_seconds
        if max_message_bytes is None:
            max_message_bytes = _default_message_bytes()
        self.max_message_bytes = max_message_bytes
        # Panel output widths learnt from the server, by configuration
        # (see _panel.py); guarded because the client may be shared.
        self._panel_widths = {}
        self._panel_widths_lock = threading.Lock()
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
        _detach_large_tensors(self._stub, self._channel)

    def close(self) -> None:
        """Closes the channel: calls still in flight are cancelled and the
        client makes no further calls."""
        self._channel.close()

    def __enter__(self) -> EncoderClient:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def _call(self, method, request):
        """One unary call with the client's deadline and metadata; a failed
        call raises PhasorError."""
        try:
            return method(request, timeout=self.deadline_seconds,
                          metadata=self._metadata)
        except grpc.RpcError as error:
            raise PhasorError.from_rpc_error(error) from None

    def encode_positions(self, positions: Optional[ArrayLike] = None, *,
                         count: Optional[int] = None, start: int = 0,
                         step: int = 1, dim: Optional[int] = None,
                         base: Optional[float] = None,
                         layout: EnumLike = None,
                         frequencies: EnumLike = None,
                         learned_table: Optional[str] = None,
                         profile: Optional[str] = None,
                         spec: SpecLike = None,
                         content: Optional[ArrayLike] = None,
                         content_scale: Optional[float] = None,
                         output_dtype: DTypeLike = "float32") -> np.ndarray:
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
        if content_scale is not None:
            request.content_scale = content_scale
        request = _wire.Outgoing(request)
        if content is not None:
            attach(request, "content", content, "float32")
        response = self._call(self._stub.EncodePositions, request)
        return from_tensor(response.encodings)

    def apply_rope(self, query: _rope.ArrayLike,
                   key: Optional[_rope.ArrayLike] = None,
                   positions: Optional[_rope.ArrayLike] = None, *,
                   position_ids: Optional[_rope.ArrayLike] = None,
                   rotary_dim: int = 0, base: Optional[float] = None,
                   layout: Optional[str] = None,
                   tensor_layout: Optional[str] = None,
                   scaling: Any = None,
                   fold_attention_factor: Optional[bool] = None,
                   max_position_embeddings: int = 0, seq_len: int = 0,
                   profile: Optional[str] = None, spec: Any = None,
                   dtype: Any = None) -> RopeResult:
        """Rotates query (and key) with RoPE: one ApplyRope call, or several
        when the tensors would exceed half of max_message_bytes or 2^23
        elements (cut along the B·T tokens, up to 4 calls in flight, joined
        in order: the same numbers as one call; seq_len is pinned to the
        whole batch's, and a profile is sent inline to pin it).

        Shapes, by `tensor_layout` ("bhtd" is the default for 4 axes,
        "thd" for 3; `layout=` takes these names too):
          "bhtd"  [B, H, T, D]  HF transformers (q/k after the head split)
          "bthd"  [B, T, H, D]  vLLM, flash-attn
          "thd"   [T, H, D]     the wire's own, ApplyRope's tokens
          "htd"   [H, T, D]
        key has the query's layout, B, T and D; its head count may differ
        (grouped-query attention). A batch goes as its B·T tokens.

        positions / position_ids (HF's name; give one): None means
        0..T-1 in every batch row; [T] or [1, T] are shared by the rows;
        [B, T] gives each row its own. Integers are token indices, reals
        continuous-time RoPE (exact: int64 / float64 on the wire). numpy
        or torch.

        dtype: query and key travel as their own dtype, and the results
        come back as the caller's type, shape and layout:
          numpy float32 / float16       -> the same (a read-only view of
                                           the reply: .copy() to write)
          numpy uint16 + dtype="bfloat16" -> uint16 bfloat16 bits
          torch float32 / float16 / bfloat16 -> torch, same dtype and
                                           device, contiguous, no grad
          float64                       -> FLOAT64, rotated in double
        dtype= ("float32", "float16", "bfloat16") picks another wire dtype
        on purpose, e.g. dtype="float32" for float64 input (returned as
        float64 holding float32 values) or "bfloat16" for float32 input
        (returned as float32 holding bfloat16 values).

        layout: the RoPE pairing "half" (NeoX / HF LLaMA rotate_half, the
        default) or "interleaved" (GPT-J / Meta), or a tensor layout.
        scaling: a RopeScaling message, its text format, a dict such as
        {"yarn": {"factor": 4.0, "original_max_position_embeddings": 4096}},
        or HF's rope_scaling / rope_parameters dict as config.json holds it
        (specs.rope_config; rope_spec_from_hf reads a whole config).
        seq_len 0 means 1 + the largest position of the whole batch, as HF's
        dynamic scaling uses.

        Returns RopeResult(query, key or None, attention_factor).
        Raises InvalidInputError (a PhasorError, ValueError and TypeError
        naming the argument) for dtypes and shapes the client cannot map
        without doubt, before any call; PhasorError for what the server
        refuses (for a cut batch, the first failing call's error; its
        positions[i] then count from that call's first token).
        """
        pairing, tensor_layout = _rope.split_layout(layout, tensor_layout)
        if positions is not None and position_ids is not None:
            raise InvalidInputError("position_ids",
                                    "give positions= or position_ids=, "
                                    "not both")
        if position_ids is not None:
            positions = position_ids
        query_operand = _rope.operand("query", query, tensor_layout)
        key_operand = None
        if key is not None:
            key_operand = _rope.operand("key", key, query_operand.layout)
            _rope.check_key(query_operand, key_operand)
        wire = _rope.wire_dtype(query_operand, dtype)
        flat_positions = _rope.flat_positions(query_operand, positions)
        config = pb.ApplyRopeRequest()
        _set_config(config, profile, spec, lambda: _rope_spec(
            rotary_dim, base, pairing, scaling, fold_attention_factor,
            max_position_embeddings, seq_len))
        total = query_operand.batch * query_operand.tokens
        per_call = _rope.tokens_per_call(
            query_operand, key_operand, wire,
            _panel.call_bytes(self.max_message_bytes), _panel.PIECE_ELEMENTS)
        if total <= per_call:
            # One call, in the caller's own layout: nothing is transposed.
            request = pb.ApplyRopeRequest(
                positions=_rope.whole_positions(query_operand, flat_positions),
                tensor_layout=_rope.server_layout(query_operand))
            request.MergeFrom(config)
            request = _wire.Outgoing(request)
            _rope.attach_whole(request, "query", query_operand, wire)
            if key_operand is not None:
                _rope.attach_whole(request, "key", key_operand, wire)
            response = self._call(self._stub.ApplyRope, request)
            return RopeResult(
                _rope.result(query_operand, _rope.reply_array(response.query),
                             wire, as_sent=True),
                _rope.result(key_operand, _rope.reply_array(response.key),
                             wire, as_sent=True)
                if key_operand is not None else None,
                response.attention_factor)
        return self._apply_rope_split(config, query_operand, key_operand,
                                      wire, flat_positions, per_call)

    def _apply_rope_split(self, config, query_operand, key_operand, wire,
                          flat_positions, per_call):
        """apply_rope over several calls of at most per_call tokens each,
        max_in_flight at once, joined in order: the same numbers as one
        call, since each token's rotation depends on its position and the
        frequencies only, and seq_len is pinned to the whole batch's."""
        total = query_operand.batch * query_operand.tokens
        if config.HasField("profile"):
            # A profile's seq_len default would be each piece's: inline it.
            found = [p for p in self.list_profiles()
                     if p.name == config.profile]
            if found and found[0].spec.HasField("rope"):
                config = pb.ApplyRopeRequest(spec=found[0].spec)
        if config.HasField("spec") and config.spec.HasField("rope") and \
                config.spec.rope.seq_len == 0:
            config.spec.rope.seq_len = _rope.default_seq_len(flat_positions,
                                                             total)
        outputs = [_rope.empty_tokens(query_operand, wire)]
        if key_operand is not None:
            outputs.append(_rope.empty_tokens(key_operand, wire))
        operands = [query_operand, key_operand]
        factors = []

        def send(begin, end):
            request = pb.ApplyRopeRequest(
                positions=_rope.positions_message(flat_positions, begin, end))
            request.MergeFrom(config)
            request = _wire.Outgoing(request)
            _rope.attach_tokens(request, "query", query_operand, wire, begin,
                                end)
            if key_operand is not None:
                _rope.attach_tokens(request, "key", key_operand, wire, begin,
                                    end)
            return self._stub.ApplyRope.future(
                request, timeout=self.deadline_seconds,
                metadata=self._metadata)

        def receive(begin, end, response):
            for out, reply, item in zip(outputs, (response.query,
                                                  response.key), operands):
                width = item.heads * item.head_dim
                out[begin * width:end * width] = _rope.reply_array(reply)
            factors.append(response.attention_factor)

        pieces = [(begin, min(total, begin + per_call))
                  for begin in range(0, total, per_call)]
        in_flight = collections.deque()
        try:
            for begin, end in pieces:
                if len(in_flight) >= _panel.MAX_IN_FLIGHT:
                    receive(*in_flight[0][:2], in_flight[0][2].result())
                    in_flight.popleft()
                in_flight.append((begin, end, send(begin, end)))
            while in_flight:
                receive(*in_flight[0][:2], in_flight[0][2].result())
                in_flight.popleft()
        except grpc.RpcError as error:
            raise PhasorError.from_rpc_error(error) from None
        finally:
            for _, _, future in in_flight:
                future.cancel()
        return RopeResult(
            _rope.result(query_operand, outputs[0], wire),
            _rope.result(key_operand, outputs[1], wire)
            if key_operand is not None else None,
            factors[0])

    def rope_tables(self, positions: Any = None, *,
                    count: Optional[int] = None, start: int = 0,
                    step: int = 1, rotary_dim: int = 0,
                    base: Optional[float] = None,
                    layout: Optional[str] = None, scaling: Any = None,
                    fold_attention_factor: Optional[bool] = None,
                    max_position_embeddings: int = 0, seq_len: int = 0,
                    profile: Optional[str] = None, spec: Any = None,
                    output_dtype: Any = "float32") -> RopeTables:
        """RopeTables(cos, sin, attention_factor, inv_freq): the tables
        ApplyRope would use, for clients with their own kernels.

        positions: N integers or reals (numpy, torch or a list; any shape,
        flattened, so HF's position_ids [B, T] give B·T rows), or the range
        count/start/step. cos and sin are numpy [N, rotary_dim/2] in
        output_dtype ("float32", "float16"; "bfloat16" widened exactly to
        float32), computed in double and rounded once; the attention factor
        is folded into them unless fold_attention_factor=False. HF's
        rotate_half wants them repeated along the last axis:
        np.concatenate([cos, cos], -1). inv_freq: the θ_i as floats.
        Other arguments as apply_rope's.
        """
        if positions is not None:
            positions = _rope.to_numpy(positions)
        request = pb.RopeTablesRequest(
            positions=_positions(positions, count, start, step),
            output_dtype=dtype_enum(output_dtype))
        _set_config(request, profile, spec, lambda: _rope_spec(
            rotary_dim, base, layout, scaling, fold_attention_factor,
            max_position_embeddings, seq_len))
        response = self._call(self._stub.RopeTables, request)
        return RopeTables(from_tensor(response.cos), from_tensor(response.sin),
                          response.attention_factor, list(response.inv_freq))

    def alibi(self, num_heads: int, q_len: int = 0, k_len: int = 0, *,
              causal: bool = False,
              output_dtype: DTypeLike = "float32") -> AlibiResult:
        """ALiBi slopes [H] and, when q_len and k_len are given, bias
        [H, q_len, k_len]."""
        request = pb.AlibiBiasRequest(num_heads=num_heads, q_len=q_len,
                                      k_len=k_len, causal=causal,
                                      output_dtype=dtype_enum(output_dtype))
        response = self._call(self._stub.AlibiBias, request)
        bias = from_tensor(response.bias) if response.HasField("bias") else None
        return AlibiResult(from_tensor(response.slopes), bias)

    def relative_bias(self, query_positions: Optional[ArrayLike] = None,
                      key_positions: Optional[ArrayLike] = None, *,
                      q_len: Optional[int] = None, k_len: Optional[int] = None,
                      q_start: int = 0, k_start: int = 0,
                      num_buckets: int = 32, max_distance: int = 128,
                      bidirectional: bool = True,
                      max_relative_position: Optional[int] = None,
                      table: Optional[ArrayLike] = None,
                      table_name: Optional[str] = None,
                      profile: Optional[str] = None, spec: SpecLike = None,
                      include_bucket_ids: bool = False,
                      output_dtype: DTypeLike = "float32") -> RelativeBiasResult:
        """RelativeBiasResult(bias, bucket_ids, num_buckets): a relative
        position bias [H, q_len, k_len] and/or its bucket ids [q_len, k_len]
        (int32), as numpy.

        Positions: query_positions / key_positions as integer arrays (token
        indices; int64 ns or numpy datetime64 for the time_buckets and
        time_alibi specs), or the ranges q_start + [0, q_len) and
        k_start + [0, k_len). Without spec= or profile=: T5 buckets
        (num_buckets, max_distance, bidirectional, HF's
        _relative_position_bucket), or Shaw's clipping when
        max_relative_position is given. table: a learned [num_buckets, H]
        table (HF's relative_attention_bias.weight), or table_name a
        server-side one; without a table only bucket_ids are returned
        (include_bucket_ids=True returns both). bias is None without a
        table, bucket_ids None when not returned.
        """
        def positions(values, count, start):
            if values is not None:
                array = np.asarray(values)
                if np.issubdtype(array.dtype, np.datetime64):
                    array = array.astype("datetime64[ns]").view(np.int64)
                return _positions(array, None, 0, 1)
            return _positions(None, count, start, 1)

        request = pb.RelativeBiasRequest(
            query_positions=positions(query_positions, q_len, q_start),
            key_positions=positions(key_positions, k_len, k_start),
            output_dtype=dtype_enum(output_dtype),
            include_bucket_ids=include_bucket_ids)

        def shortcut():
            relative = pb.RelativeBiasSpec()
            if max_relative_position is not None:
                relative.shaw.max_relative_position = max_relative_position
            else:
                relative.t5.num_buckets = num_buckets
                relative.t5.max_distance = max_distance
                relative.t5.direction = (pb.RelativeBiasSpec.BIDIRECTIONAL
                                         if bidirectional
                                         else pb.RelativeBiasSpec.CAUSAL)
            return pb.EncoderSpec(relative_bias=relative)

        _set_config(request, profile, spec, shortcut)
        if table_name:
            if not request.HasField("spec"):
                raise ValueError("table_name= needs an inline spec (a "
                                 "profile names its own table)")
            request.spec.relative_bias.table = table_name
        if table is not None:
            request.table.CopyFrom(to_tensor(table))
        response = self._call(self._stub.RelativeBias, request)
        bias = (from_tensor(response.bias) if response.HasField("bias")
                else None)
        ids = (from_tensor(response.bucket_ids)
               if response.HasField("bucket_ids") else None)
        return RelativeBiasResult(bias, ids, response.num_buckets)

    @staticmethod
    def _observations(timestamps, values, mask, content, channel_names,
                      time_unit=None, output_dtype="float32"):
        """(an _wire.Outgoing EncodeObservationsRequest holding the
        observations of one wide series, tz-aware input's zone or None);
        values may be None (timestamps only)."""
        times = read_times(timestamps, "timestamps", time_unit)
        request = _wire.Outgoing(pb.EncodeObservationsRequest(
            observations=pb.Observations(channel_names=channel_names or [])))
        attach(request, "observations.timestamps", times.array,
               times.wire_dtype)
        if values is not None:
            values = np.asarray(values)
            if values.ndim == 1:
                values = values[:, None]
            attach(request, "observations.values", values,
                   values.dtype if values.dtype == np.float32 else "float64")
        if mask is not None:
            attach(request, "observations.mask", mask, "uint8")
        if content is not None:
            content = np.asarray(content)
            attach(request, "observations.content", content,
                   _content_dtype(content, output_dtype))
        return request, times.time_zone

    def encode_observations(self, timestamps: ArrayLike,
                            values: Optional[ArrayLike] = None,
                            mask: Optional[ArrayLike] = None, *,
                            spec: SpecLike = None,
                            profile: Optional[str] = None,
                            state: Optional[pb.SeriesState] = None,
                            content: Optional[ArrayLike] = None,
                            channel_names: Optional[Sequence[str]] = None,
                            output_dtype: DTypeLike = "float32",
                            time_unit: Optional[str] = None,
                            content_block: BlockLike = None,
                            time: BlockLike = None,
                            time2vec: BlockLike = None,
                            gaps: BlockLike = None,
                            calendar: BlockLike = None,
                            combine: EnumLike = None,
                            d_model: Optional[int] = None) -> Features:
        """Features [T, F] of one series of wide observations.

        timestamps [T]: int64 ns since the Unix epoch, numpy datetime64, a
        pandas DatetimeIndex or datetime Series (naive = UTC; a tz-aware
        one's zone becomes the calendar time_zone unless the spec names
        one), or numbers with time_unit ("s", "ms", "us", "ns"). Float
        arrays without time_unit are an InvalidInputError (float seconds
        read as ns would be silently wrong). values [T, C] with NaN =
        missing, or None for timestamps only; mask [T, C] optional.
        Spec: spec= (EncoderSpec / TemporalSpec message, text format or
        dict), profile=, or the blocks as keywords (content_block, time,
        time2vec, gaps, calendar, combine, d_model; dicts with
        case-insensitive enum names), which also override spec's blocks.
        content: token embeddings [T, d]. output_dtype: "float32"
        (default), "float16", "bfloat16" or "float64" (np.float64 too;
        computed in float64 by the server, not widened; float64 content is
        then sent as float64). Returns Features(features,
        schema, state); pass state back to continue the series later, and
        feature_names(schema, channel_names) names the columns. Server
        errors raise PhasorError.
        """
        request, zone = self._observations(
            timestamps, values, mask, content, channel_names, time_unit,
            output_dtype)
        return self._encode_one_series(
            request, zone, spec, profile, state, output_dtype,
            dict(content=content_block, time=time, time2vec=time2vec,
                 gaps=gaps, calendar=calendar, combine=combine,
                 d_model=d_model))

    def encode_events(self, times: ArrayLike, channels: ArrayLike,
                      values: Optional[ArrayLike] = None, *,
                      spec: SpecLike = None, profile: Optional[str] = None,
                      state: Optional[pb.SeriesState] = None,
                      num_channels: int = 0,
                      channel_names: Optional[Sequence[str]] = None,
                      content: Optional[ArrayLike] = None,
                      output_dtype: DTypeLike = "float32",
                      time_unit: Optional[str] = None,
                      content_block: BlockLike = None,
                      time: BlockLike = None, time2vec: BlockLike = None,
                      gaps: BlockLike = None, calendar: BlockLike = None,
                      combine: EnumLike = None,
                      d_model: Optional[int] = None) -> Features:
        """Features [N, F] of one series in the long layout: one event
        (time, channel, value) per row and one output row per event
        (SeFT/STraTS triplets).

        times [N] as for encode_observations, non-decreasing. channels [N]:
        channel numbers in [0, C), or names when channel_names is given
        (then C = len(channel_names)). values [N] (NaN = the event observes
        nothing) or None. num_channels C: default len(channel_names), else
        the state's, else 1 + the largest channel; set it when this chunk
        may not show every channel. Spec keywords as encode_observations.
        Returns Features(features, schema, state).
        """
        parsed = read_times(times, "event_times", time_unit)
        channels = np.asarray(channels)
        if channels.shape != parsed.array.shape:
            raise InvalidInputError(
                "event_channels", f"expected {len(parsed.array)} channels, "
                                  f"one per time, got shape {channels.shape}")
        if channels.dtype.kind not in "iu":
            if channel_names is None:
                raise InvalidInputError(
                    "event_channels", f"channels of dtype {channels.dtype} "
                                      f"need channel_names= to number them")
            lookup = {name: index for index, name in enumerate(channel_names)}
            numbers = [lookup.get(name, -1) for name in channels.tolist()]
            if -1 in numbers:
                row = numbers.index(-1)
                raise InvalidInputError(
                    f"event_channels[{row}]",
                    f"{channels[row]!r} is not in channel_names")
            channels = np.asarray(numbers, dtype=np.int32)
        request = _wire.Outgoing(pb.EncodeObservationsRequest(
            observations=pb.Observations(channel_names=channel_names or [])))
        attach(request, "observations.event_times", parsed.array,
               parsed.wire_dtype)
        attach(request, "observations.event_channels", channels, "int32")
        if values is not None:
            values = np.asarray(values)
            attach(request, "observations.event_values", values,
                   values.dtype if values.dtype == np.float32 else "float64")
        if num_channels:
            request.message.observations.num_channels = num_channels
        if content is not None:
            content = np.asarray(content)
            attach(request, "observations.content", content,
                   _content_dtype(content, output_dtype))
        return self._encode_one_series(
            request, parsed.time_zone, spec, profile, state, output_dtype,
            dict(content=content_block, time=time, time2vec=time2vec,
                 gaps=gaps, calendar=calendar, combine=combine,
                 d_model=d_model))

    def _encode_one_series(self, request, zone, spec, profile, state,
                           output_dtype, blocks) -> Features:
        """One EncodeObservations call of `request` (an _wire.Outgoing
        holding the observations): the spec from `spec`/`profile`/the
        keyword `blocks`, the data's time zone applied, `state` continued."""
        config = _frame.apply_data_zone(
            _specs.temporal_config(spec, profile, blocks), zone)
        request.message.output_dtype = dtype_enum(output_dtype)
        _set_config(request.message, profile, config, _no_shortcut)
        if state is not None:
            request.message.state.CopyFrom(state)
        response = self._call(self._stub.EncodeObservations, request)
        return Features(from_tensor(response.features), list(response.schema),
                        response.state)

    def encode_observations_stream(
            self,
            chunks: Iterable[Union[ArrayLike,
                                   Tuple[Optional[ArrayLike], ...]]], *,
            spec: SpecLike = None, profile: Optional[str] = None,
            output_dtype: DTypeLike = "float32",
            time_unit: Optional[str] = None,
            content_block: BlockLike = None, time: BlockLike = None,
            time2vec: BlockLike = None, gaps: BlockLike = None,
            calendar: BlockLike = None, combine: EnumLike = None,
            d_model: Optional[int] = None) -> Iterator[Features]:
        """Yields Features per chunk of one series, sent over one stream.

        chunks: an iterable, in time order, of (timestamps, values) or
        (timestamps, values, mask) tuples, or of bare timestamps (a tuple
        is always read as such a tuple; values may be None). Times as for
        encode_observations (time_unit for plain numbers); the first
        chunk's tz-aware zone becomes the calendar zone unless the spec
        names one. Spec keywords as encode_observations. The deadline
        covers the whole stream; errors raise PhasorError.
        """
        blocks = dict(content=content_block, time=time, time2vec=time2vec,
                      gaps=gaps, calendar=calendar, combine=combine,
                      d_model=d_model)
        config = _specs.temporal_config(spec, profile, blocks)
        # gRPC swallows an exception raised while it pulls requests
        # ("Exception iterating requests!"): keep it, cancel the call and
        # raise it to the caller instead.
        failure = []
        call = {}

        def requests():
            try:
                for index, chunk in enumerate(chunks):
                    if isinstance(chunk, tuple):
                        timestamps = chunk[0]
                        values = chunk[1] if len(chunk) > 1 else None
                        mask = chunk[2] if len(chunk) > 2 else None
                    else:
                        timestamps, values, mask = chunk, None, None
                    try:
                        request, zone = self._observations(
                            timestamps, values, mask, None, None, time_unit)
                    except InvalidInputError as error:
                        field, description = error.field_violations()[0]
                        raise InvalidInputError(f"chunks[{index}].{field}",
                                                description) from None
                    request.message.output_dtype = dtype_enum(output_dtype)
                    if index == 0:
                        _set_config(request.message, profile,
                                    _frame.apply_data_zone(config, zone),
                                    _no_shortcut)
                    yield request
            except Exception as error:  # noqa: BLE001 - re-raised below
                failure.append(error)
                if "responses" in call:
                    call["responses"].cancel()

        responses = self._stub.EncodeObservationsStream(
            requests(), timeout=self.deadline_seconds, metadata=self._metadata)
        call["responses"] = responses
        try:
            for response in responses:
                yield Features(from_tensor(response.features),
                               list(response.schema), response.state)
        except grpc.RpcError as error:
            if failure:
                raise failure[0] from None
            raise PhasorError.from_rpc_error(error) from None
        if failure:
            raise failure[0]

    def encode_panel(
            self, timestamps: Optional[ArrayLike] = None,
            values: Optional[ArrayLike] = None,
            mask: Optional[ArrayLike] = None, *,
            series_offsets: Optional[ArrayLike] = None,
            series_ids: Optional[ArrayLike] = None,
            time_zones: Optional[Sequence[str]] = None,
            time_zone_index: Optional[ArrayLike] = None,
            states: Optional[Sequence[Optional[pb.SeriesState]]] = None,
            spec: SpecLike = None, profile: Optional[str] = None,
            output_dtype: DTypeLike = "float32",
            content: Optional[ArrayLike] = None,
            channel_names: Optional[Sequence[str]] = None,
            event_times: Optional[ArrayLike] = None,
            event_channels: Optional[ArrayLike] = None,
            event_values: Optional[ArrayLike] = None,
            num_channels: int = 0, max_in_flight: int = _panel.MAX_IN_FLIGHT,
            time_unit: Optional[str] = None, content_block: BlockLike = None,
            time: BlockLike = None, time2vec: BlockLike = None,
            gaps: BlockLike = None, calendar: BlockLike = None,
            combine: EnumLike = None,
            d_model: Optional[int] = None) -> Panel:
        """Features of S series in one call: Panel(features [rows, F],
        schema, states [S], series_offsets [S+1]).

        Wide: timestamps [T] (int64 ns, datetime64, a pandas DatetimeIndex
        or datetime Series, or numbers with time_unit="s"/"ms"/"us"/"ns";
        floats without time_unit are an InvalidInputError), values [T, C]
        (NaN = missing; optional), mask [T, C].
        Long: event_times [N], event_channels [N] (int), event_values [N].
        Series s owns rows [series_offsets[s], series_offsets[s+1]); or give
        series_ids, one label per row with each series' rows contiguous (the
        series are then the label runs in row order). time_zones: IANA names
        for the calendar block, one for all, one per series, or a list
        indexed by time_zone_index [S]. states: the `states` of a previous
        call (S entries) to continue every series. content: embeddings
        [rows, d]. Tz-aware times give the calendar zone when neither the
        spec nor time_zones names one. Spec: spec=, profile= or keyword
        blocks as encode_observations.

        A panel whose request or reply would exceed max_message_bytes (or
        the server's limits) is cut at series boundaries (a series too long
        for one message into chunks carried on with its state) and sent as
        several concurrent requests; the joined result is the same, bytewise,
        as one call. Each request has the client's deadline. Errors name
        series and rows as numbered in this call.
        """
        wide = timestamps is not None
        parsed, row_tensors, rows, offsets, values = self._panel_rows(
            timestamps, values, mask, content, event_times, event_channels,
            event_values, series_offsets, series_ids, time_unit, output_dtype)
        if states is not None:
            states = [state if state is not None else pb.SeriesState()
                      for state in states]

        base = pb.EncodeObservationsRequest(
            output_dtype=dtype_enum(output_dtype))
        config = _specs.temporal_config(spec, profile, dict(
            content=content_block, time=time, time2vec=time2vec, gaps=gaps,
            calendar=calendar, combine=combine, d_model=d_model))
        if not time_zones:
            config = _frame.apply_data_zone(config, parsed.time_zone)
        _set_config(base, profile, config, _no_shortcut)
        base.observations.channel_names.extend(channel_names or [])
        if num_channels:
            base.observations.num_channels = num_channels
        elif not wide and rows:
            # Every cut must agree on C, which a chunk may not show.
            base.observations.num_channels = (
                len(channel_names) if channel_names else
                len(states[0].channels) if states and states[0].channels else
                int(np.max(row_tensors[1].array)) + 1)
        if len(offsets) == 1 and series_ids is not None:
            # No rows, no series: F from the probe, nothing to encode.
            return self._panel_empty(base, row_tensors)

        layout = _panel.Layout(pb, rows, offsets, row_tensors, base,
                               time_zones, None, states)
        # Valid offsets are the server's to judge; only cut well-formed ones.
        cuttable = (len(offsets) >= 2 and offsets[0] == 0
                    and offsets[-1] == rows
                    and bool(np.all(np.diff(offsets) >= 0))
                    and (states is None or len(states) in (0, len(offsets) - 1)))
        jobs = None
        if cuttable:
            budget = self._panel_budget(layout, len(channel_names or ()) or
                                        base.observations.num_channels or
                                        (values.shape[1] if wide and
                                         values is not None else 0))
            jobs = _panel.plan(layout, budget)
        if jobs is not None and time_zones:
            layout.time_zone_index = _panel.resolve_time_zone_index(
                list(time_zones), time_zone_index, layout.num_series)
        if jobs is None:
            layout.time_zone_index = time_zone_index
            whole = _panel.Piece(0, len(offsets) - 1, 0, rows)
            try:
                response = self._call(self._stub.EncodeObservations,
                                      layout.request(whole, whole=True))
            except grpc.RpcError as error:
                if (not cuttable or error.code() !=
                        grpc.StatusCode.RESOURCE_EXHAUSTED or rows <= 1):
                    raise
                # The server's limits are below the client's: cut after all.
                jobs = [list(_panel.halves(whole, offsets) or [whole])]
                if time_zones:
                    layout.time_zone_index = _panel.resolve_time_zone_index(
                        list(time_zones), time_zone_index, layout.num_series)
            else:
                return Panel(from_tensor(response.features),
                             list(response.schema), list(response.states),
                             from_tensor(response.series_offsets)
                             if response.HasField("series_offsets")
                             else offsets)
        return self._panel_split(layout, jobs, max_in_flight)

    _PANEL_ROW_KEYS = frozenset((
        "timestamps", "values", "mask", "content", "event_times",
        "event_channels", "event_values", "series_offsets", "series_ids"))

    def encode_panel_stream(
            self, chunks: Iterable[Mapping[str, Any]], *,
            time_zones: Optional[Sequence[str]] = None,
            time_zone_index: Optional[ArrayLike] = None,
            states: Optional[Sequence[Optional[pb.SeriesState]]] = None,
            spec: SpecLike = None, profile: Optional[str] = None,
            output_dtype: DTypeLike = "float32",
            channel_names: Optional[Sequence[str]] = None,
            num_channels: int = 0, time_unit: Optional[str] = None,
            content_block: BlockLike = None, time: BlockLike = None,
            time2vec: BlockLike = None, gaps: BlockLike = None,
            calendar: BlockLike = None, combine: EnumLike = None,
            d_model: Optional[int] = None) -> Iterator[Panel]:
        """Yields a Panel per chunk of the same S series, sent over one
        EncodeObservationsStream: the panel form of
        encode_observations_stream.

        chunks: an iterable, in time order, of mappings holding
        encode_panel's row arguments for the next stretch of every series:
        timestamps, values, mask, content (wide) or event_times,
        event_channels, event_values (long), with series_offsets [S+1] or
        series_ids. Every chunk has the same S (a series with nothing new
        has an empty range). The server carries each series' state from
        chunk to chunk, so the features of chunk k equal those of encode_panel
        called with the states chunk k−1 returned; `states` continues the
        series of an earlier call. time_zones/time_zone_index, spec and
        output dtype as encode_panel and fixed for the stream; the first
        chunk's tz-aware zone becomes the calendar zone when neither the spec
        nor time_zones names one; a long layout's channel count comes from
        channel_names, num_channels, states or the first chunk. Each chunk
        travels as one message: a chunk over max_message_bytes is refused
        (RESOURCE_EXHAUSTED), not cut — send smaller chunks, or encode_panel,
        which cuts. The deadline covers the whole stream; errors raise
        PhasorError (InvalidInputError naming chunks[k] for the client's own
        checks).
        """
        blocks = dict(content=content_block, time=time, time2vec=time2vec,
                      gaps=gaps, calendar=calendar, combine=combine,
                      d_model=d_model)
        config = _specs.temporal_config(spec, profile, blocks)
        if states is not None:
            states = [state if state is not None else pb.SeriesState()
                      for state in states]
        failure = []
        call = {}

        def requests():
            base = None
            try:
                for index, chunk in enumerate(chunks):
                    unknown = set(chunk) - self._PANEL_ROW_KEYS
                    if unknown:
                        raise ValueError(
                            f"chunks[{index}]: unknown keys {sorted(unknown)};"
                            f" expected {sorted(self._PANEL_ROW_KEYS)}")
                    try:
                        parsed, row_tensors, rows, offsets, _ = (
                            self._panel_rows(
                                chunk.get("timestamps"), chunk.get("values"),
                                chunk.get("mask"), chunk.get("content"),
                                chunk.get("event_times"),
                                chunk.get("event_channels"),
                                chunk.get("event_values"),
                                chunk.get("series_offsets"),
                                chunk.get("series_ids"), time_unit,
                                output_dtype))
                    except InvalidInputError as error:
                        field, description = error.field_violations()[0]
                        raise InvalidInputError(f"chunks[{index}].{field}",
                                                description) from None
                    if base is None:
                        base = pb.EncodeObservationsRequest(
                            output_dtype=dtype_enum(output_dtype))
                        first_config = (config if time_zones else
                                        _frame.apply_data_zone(
                                            config, parsed.time_zone))
                        _set_config(base, profile, first_config,
                                    _no_shortcut)
                        base.observations.channel_names.extend(
                            channel_names or [])
                        long_layout = "event_times" in chunk
                        if num_channels:
                            base.observations.num_channels = num_channels
                        elif long_layout and not channel_names:
                            # Later chunks may not show every channel.
                            base.observations.num_channels = (
                                len(states[0].channels)
                                if states and states[0].channels else
                                int(np.max(row_tensors[1].array)) + 1
                                if rows else 0)
                        request_base = base
                    else:
                        request_base = pb.EncodeObservationsRequest(
                            output_dtype=base.output_dtype,
                            observations=base.observations)
                    layout = _panel.Layout(
                        pb, rows, offsets, row_tensors, request_base,
                        time_zones, time_zone_index,
                        states if index == 0 else None)
                    whole = _panel.Piece(0, len(offsets) - 1, 0, rows)
                    yield layout.request(whole, whole=True)
            except Exception as error:  # noqa: BLE001 - re-raised below
                failure.append(error)
                if "responses" in call:
                    call["responses"].cancel()

        responses = self._stub.EncodeObservationsStream(
            requests(), timeout=self.deadline_seconds, metadata=self._metadata)
        call["responses"] = responses
        try:
            for response in responses:
                yield Panel(from_tensor(response.features),
                            list(response.schema), list(response.states),
                            from_tensor(response.series_offsets))
        except grpc.RpcError as error:
            if failure:
                raise failure[0] from None
            raise PhasorError.from_rpc_error(error) from None
        if failure:
            raise failure[0]

    @staticmethod
    def _panel_rows(timestamps, values, mask, content, event_times,
                    event_channels, event_values, series_offsets, series_ids,
                    time_unit, output_dtype):
        """encode_panel's row arguments read into wire tensors:
        (parsed times, row tensors, rows, offsets [S+1], values [T, C] or
        None)."""
        wide = timestamps is not None
        if wide == (event_times is not None):
            raise ValueError("give timestamps= (wide) or event_times= (long)")
        if not wide and event_channels is None:
            raise ValueError("event_times= needs event_channels=")
        parsed = read_times(timestamps if wide else event_times,
                            "timestamps" if wide else "event_times",
                            time_unit)
        times, times_dtype = parsed.array, parsed.wire_dtype
        if wide:
            row_tensors = [_panel.RowTensor("timestamps", times, times_dtype)]
            if values is not None:
                values = np.asarray(values)
                if values.ndim == 1:
                    values = values[:, None]
                row_tensors.append(_panel.RowTensor(
                    "values", values,
                    np.float32 if values.dtype == np.float32 else np.float64))
            if mask is not None:
                mask = np.asarray(mask)
                if mask.ndim == 1:
                    mask = mask[:, None]
                row_tensors.append(_panel.RowTensor("mask", mask, np.uint8))
        else:
            row_tensors = [
                _panel.RowTensor("event_times", times, times_dtype),
                _panel.RowTensor("event_channels",
                                 np.asarray(event_channels), np.int32)]
            if event_values is not None:
                event_values = np.asarray(event_values)
                row_tensors.append(_panel.RowTensor(
                    "event_values", event_values,
                    np.float32 if event_values.dtype == np.float32
                    else np.float64))
        if content is not None:
            content = np.asarray(content)
            row_tensors.append(_panel.RowTensor(
                "content", content, _content_dtype(content, output_dtype)))
        rows = len(times)
        for row_tensor in row_tensors:
            if row_tensor.array.shape[:1] != (rows,):
                raise ValueError(f"{row_tensor.field}: expected {rows} rows, "
                                 f"got shape {row_tensor.array.shape}")

        if (series_offsets is None) == (series_ids is None):
            raise ValueError("give series_offsets= or series_ids=")
        if series_ids is not None:
            offsets = _panel.offsets_from_ids(series_ids, rows)
        else:
            offsets = np.asarray(series_offsets, dtype=np.int64).reshape(-1)
        return parsed, row_tensors, rows, offsets, values

    def _panel_probe(self, layout):
        """(F, reply bytes besides the rows) for the layout's
        configuration: remembered, else asked with one empty series."""
        key = (layout.base_request.SerializeToString(deterministic=True),
               tuple((t.field, t.array.shape[1:], np.dtype(t.dtype).str)
                     for t in layout.row_tensors))
        with self._panel_widths_lock:
            known = self._panel_widths.get(key)
        if known is not None:
            return known
        response = self._call(self._stub.EncodeObservations, layout.probe())
        features = from_tensor(response.features)
        width = features.shape[1] if features.ndim == 2 else 0
        known = (width, response.ByteSize(), list(response.schema))
        with self._panel_widths_lock:
            self._panel_widths[key] = known
        return known

    def _panel_empty(self, base, row_tensors):
        layout = _panel.Layout(pb, 0, np.zeros(2, dtype=np.int64),
                               row_tensors, base, None, None, None)
        response = self._call(self._stub.EncodeObservations, layout.probe())
        return Panel(from_tensor(response.features), list(response.schema),
                     [], np.zeros(1, dtype=np.int64))

    def _panel_budget(self, layout, num_channels):
        width, reply_fixed, _ = self._panel_probe(layout)
        return _panel.Budget(
            bytes=_panel.call_bytes(self.max_message_bytes),
            elements=_panel.PIECE_ELEMENTS, width=width,
            out_itemsize=_OUTPUT_ITEMSIZE.get(layout.base_request.output_dtype,
                                              4),
            out_fixed_bytes=reply_fixed + _panel._REQUEST_SLACK_BYTES,
            in_fixed_bytes=(layout.base_request.ByteSize()
                            + sum(len(name) + 2 for name in
                                  layout.time_zones)
                            + _panel._REQUEST_SLACK_BYTES),
            state_bytes=(_panel._STATE_FIXED_BYTES
                         + _panel._STATE_CHANNEL_BYTES * num_channels))

    def _panel_split(self, layout, jobs, max_in_flight):
        offsets = layout.offsets
        states = [None] * layout.num_series
        result = {}

        def on_piece(piece, response):
            features = from_tensor(response.features)
            if "features" not in result:
                result["features"] = np.empty(
                    (layout.rows,) + features.shape[1:], dtype=features.dtype)
                result["schema"] = list(response.schema)
            result["features"][piece.row_begin:piece.row_end] = features
            states[piece.series_begin:piece.series_end] = response.states

        def send(request):
            return self._stub.EncodeObservations.future(
                request, timeout=self.deadline_seconds,
                metadata=self._metadata)

        elements_per_row = {
            t.field: int(np.prod(t.array.shape[1:], dtype=np.int64))
            for t in layout.row_tensors}

        def renumbered(error, piece):
            return PhasorError.from_rpc_error(_panel.PanelError(
                error, piece, offsets, elements_per_row, _status,
                _error_details))

        _panel.run(jobs, layout, send, on_piece, max(1, max_in_flight),
                   renumbered)
        if "features" not in result:  # Every series empty.
            width, _, schema = self._panel_probe(layout)
            result["features"] = np.empty((0, width), dtype=np.float32)
            result["schema"] = schema
        return Panel(result["features"], result["schema"], states, offsets)

    def encode_frame(
            self, df: pd.DataFrame, *,
            series_column: Optional[Hashable] = None,
            time_column: Optional[Hashable] = None,
            value_columns: Union[None, Hashable, Sequence[Hashable]] = None,
            channel_column: Optional[Hashable] = None,
            channels: Optional[Sequence[Any]] = None,
            time_zones: Union[None, str, Mapping[Any, str]] = None,
            states: Optional[Mapping[Any, Any]] = None,
            spec: SpecLike = None, profile: Optional[str] = None,
            time_unit: Optional[str] = None,
            output_dtype: DTypeLike = "float32",
            content_block: BlockLike = None, time: BlockLike = None,
            time2vec: BlockLike = None, gaps: BlockLike = None,
            calendar: BlockLike = None, combine: EnumLike = None,
            d_model: Optional[int] = None) -> _frame.FrameResult:
        """Encodes a pandas panel DataFrame in one go (through encode_panel)
        and returns FrameResult(frame, states, schema, channels): `frame`
        has one named column per feature (time.sin_0, gaps.delta.<channel>,
        calendar.hour_of_day.sin, ...), the input's index and row order;
        `states` maps each series id to its SeriesState for states= of the
        next call.

        Long layout: series_column, time_column, one value column
        (value_columns) and, optionally, channel_column (then each row is
        an event of that channel; pass channels= to fix their order).
        Nixtla's unique_id/ds/y and GluonTS's item_id/timestamp/target are
        found by name when no column is named. Wide layout: one value
        column per channel (default: every numeric column but the series
        and time), time from time_column or the DatetimeIndex, series
        column optional. Rows need not be sorted: see phasor_client.frame.
        time_zones: one IANA name, or {series id: name}; by default a
        tz-aware time column's zone, unless the spec names one. Spec
        arguments as encode_observations. Errors raise PhasorError
        (InvalidInputError for the frame itself, naming the row).
        """
        return _frame.encode_frame(
            self, df, series_column=series_column, time_column=time_column,
            value_columns=value_columns, channel_column=channel_column,
            channels=channels, time_zones=time_zones, states=states,
            spec=spec, profile=profile, time_unit=time_unit,
            output_dtype=output_dtype,
            blocks=dict(content=content_block, time=time, time2vec=time2vec,
                        gaps=gaps, calendar=calendar, combine=combine,
                        d_model=d_model))

    def describe(self, *, dim: Optional[int] = None,
                 rotary_dim: Optional[int] = None,
                 base: Optional[float] = None, spec: SpecLike = None,
                 profile: Optional[str] = None, num_offsets: int = 0,
                 offset_step: Optional[float] = None, seq_len: int = 0
                 ) -> pb.DescribeResponse:
        """The DescribeResponse: frequencies, wavelengths, unambiguous range,
        nearest-code distance and the similarity curve. For a rope spec,
        `seq_len` picks the frequencies ApplyRope uses for that sequence
        length (dynamic and LongRoPE scaling); the response's seq_len says
        which length was used."""
        request = pb.DescribeRequest(num_offsets=num_offsets, seq_len=seq_len)
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

    def list_profiles(self) -> List[pb.ProfileInfo]:
        """The server's profiles (phasor.v1.ProfileInfo messages)."""
        return list(self._call(self._stub.ListProfiles,
                               pb.ListProfilesRequest()).profiles)

    def echo(self, payload: bytes) -> bytes:
        """The payload back; needs a server started with --enable_echo."""
        return self._call(self._stub.Echo,
                          pb.EchoRequest(payload=payload)).payload

    @_raises_phasor_error
    def health(self, service: str = "") -> str:
        """"SERVING", "NOT_SERVING", ... for the server ("") or a service."""
        stub = _health_grpc.HealthStub(self._channel)
        response = stub.Check(_health.HealthCheckRequest(service=service),
                              timeout=self.deadline_seconds)
        return serving_status_name(response.status)

    def watch_health(self, service: str = ""
                     ) -> Iterator[_health.HealthCheckResponse]:
        """The grpc.health.v1 Watch call: iterates over HealthCheckResponse
        messages (serving_status_name(r.status)) as the status changes.

        The call is bounded by the client's deadline; its cancel() ends the
        watch early.
        """
        stub = _health_grpc.HealthStub(self._channel)
        return stub.Watch(_health.HealthCheckRequest(service=service),
                          timeout=self.deadline_seconds)

    @_raises_phasor_error
    def list_services(self) -> List[str]:
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

    @_raises_phasor_error
    def file_containing_symbol(self, symbol: str) -> List[bytes]:
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
