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

Layout: this module is the API, each method's signature and contract; the
bodies live by concern: _channel.py (channel, service config, TLS, token,
health and reflection), _positional.py (positions, ALiBi, relative bias,
describe), _rope.py (apply_rope, rope_tables), _observations.py (one
series), _panel_calls.py (panels, cut to fit the message limits, with the
plan in _panel.py), _streams.py (the streaming calls) and frame.py
(DataFrames); shm.py the same large calls through shared memory
(shared_memory()).

Thread-safety: an EncoderClient may be shared by threads (grpc channels are).
"""

from __future__ import annotations

import threading
import weakref
from typing import (TYPE_CHECKING, Any, Hashable, Iterable, Iterator, List,
                    Mapping, Optional, Sequence, Tuple, Union)

import grpc
import numpy as np

from . import (_channel, _observations, _panel, _panel_calls, _positional,
               _rope, _streams)
from . import frame as _frame
from ._channel import DEFAULT_SERVICE_CONFIG
from ._stubs import encoder_pb2 as pb
from ._stubs import health_pb2 as _health
# The vocabulary of the signatures below and the results the methods return
# (see _types.py); dask.py and other modules import them from here.
from ._types import (AlibiResult, ArrayLike, BlockLike, EnumLike, Features,
                     Panel, PathLike, RelativeBiasResult, RopeResult,
                     RopeTables)
from .errors import PhasorError, bad_request_violations
from .shm import SharedMemorySession
from .specs import SpecLike
from .tensors import DTypeLike

if TYPE_CHECKING:  # pandas is optional (the "pandas" extra).
    import pandas as pd

__all__ = [
    "DEFAULT_SERVICE_CONFIG", "AlibiResult", "ArrayLike", "BlockLike",
    "EncoderClient", "EnumLike", "Features", "Panel", "PathLike",
    "RelativeBiasResult", "RopeResult", "RopeTables", "field_violations",
    "pb", "serving_status_name",
]


def field_violations(error: grpc.RpcError) -> List[Tuple[str, str]]:
    """[(field, description)] from a grpc.RpcError's BadRequest detail
    (PhasorError.field_violations() says the same)."""
    if isinstance(error, PhasorError):
        return error.field_violations()
    return bad_request_violations(error.trailing_metadata())


def serving_status_name(status: int) -> str:
    """"SERVING", "NOT_SERVING", ... for a HealthCheckResponse.status."""
    return _channel.serving_status_name(status)


def _blocks(content, time, time2vec, gaps, calendar, combine, d_model):
    """The temporal methods' keyword blocks, as specs.temporal_config takes
    them."""
    return dict(content=content, time=time, time2vec=time2vec, gaps=gaps,
                calendar=calendar, combine=combine, d_model=d_model)


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
        default, DEFAULT_SERVICE_CONFIG (client/service_config.json, which
        the C++ and Node clients load too), retries calls that fail with
        UNAVAILABLE or CANCELLED (a replica shutting down) or
        RESOURCE_EXHAUSTED (a replica whose memory budget is in use) on
        another replica, so losing a replica loses no call.
        None = no service config (no retry policy; gRPC's transparent
        retries of calls that never reached a server remain).
        """
        if deadline_seconds <= 0:
            raise ValueError("deadline_seconds must be positive")
        self.deadline_seconds = deadline_seconds
        if max_message_bytes is None:
            max_message_bytes = _channel.default_message_bytes()
        self.max_message_bytes = max_message_bytes
        # Panel output widths learnt from the server, by configuration
        # (see _panel_calls.py); guarded because the client may be shared.
        self._panel_widths = {}
        self._panel_widths_lock = threading.Lock()
        # Sessions of shared_memory(), closed (regions unregistered and
        # unlinked) before the channel.
        self._shm_sessions = weakref.WeakSet()
        self._channel, self._metadata, self._stub = _channel.open_channel(
            target, max_message_bytes=max_message_bytes, tls=tls,
            tls_ca=tls_ca, tls_cert=tls_cert, tls_key=tls_key,
            tls_server_name=tls_server_name, token=token,
            token_file=token_file,
            load_balancing_policy=load_balancing_policy,
            channel_options=channel_options, service_config=service_config)

    def close(self) -> None:
        """Closes the channel: calls still in flight are cancelled and the
        client makes no further calls. Its shared_memory() sessions are
        closed first."""
        for session in list(self._shm_sessions):
            try:
                session.close()
            except PhasorError:  # The server is gone: its regions with it.
                pass
        self._channel.close()

    def __enter__(self) -> EncoderClient:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def shared_memory(self, *, key_prefix: str = "/phasor",
                      copy: bool = False) -> SharedMemorySession:
        """A SharedMemorySession (phasor_client/shm.py): apply_rope,
        encode_panel and encode_frame of a profile through the Open
        Inference Protocol with inputs and outputs in a POSIX shared-memory
        region, for a client on the server's host (a server started with
        --system_shared_memory=true; key_prefix must match its
        --shared_memory_key_prefix). Results are views of the region, valid
        until the session's next call or close(), unless copy=True. Close
        the session (or use it in a `with`) to unregister and unlink the
        region; closing this client closes it too.
        """
        session = SharedMemorySession(self, key_prefix=key_prefix, copy=copy)
        self._shm_sessions.add(session)
        return session

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
        return _positional.encode_positions(
            self, positions, count=count, start=start, step=step, dim=dim,
            base=base, layout=layout, frequencies=frequencies,
            learned_table=learned_table, profile=profile, spec=spec,
            content=content, content_scale=content_scale,
            output_dtype=output_dtype)

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
        return _rope.apply_rope(
            self, query, key, positions, position_ids=position_ids,
            rotary_dim=rotary_dim, base=base, layout=layout,
            tensor_layout=tensor_layout, scaling=scaling,
            fold_attention_factor=fold_attention_factor,
            max_position_embeddings=max_position_embeddings,
            seq_len=seq_len, profile=profile, spec=spec, dtype=dtype)

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
        return _rope.rope_tables(
            self, positions, count=count, start=start, step=step,
            rotary_dim=rotary_dim, base=base, layout=layout, scaling=scaling,
            fold_attention_factor=fold_attention_factor,
            max_position_embeddings=max_position_embeddings,
            seq_len=seq_len, profile=profile, spec=spec,
            output_dtype=output_dtype)

    def alibi(self, num_heads: int, q_len: int = 0, k_len: int = 0, *,
              causal: bool = False,
              output_dtype: DTypeLike = "float32") -> AlibiResult:
        """ALiBi slopes [H] and, when q_len and k_len are given, bias
        [H, q_len, k_len]."""
        return _positional.alibi(self, num_heads, q_len, k_len,
                                 causal=causal, output_dtype=output_dtype)

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
        return _positional.relative_bias(
            self, query_positions, key_positions, q_len=q_len, k_len=k_len,
            q_start=q_start, k_start=k_start, num_buckets=num_buckets,
            max_distance=max_distance, bidirectional=bidirectional,
            max_relative_position=max_relative_position, table=table,
            table_name=table_name, profile=profile, spec=spec,
            include_bucket_ids=include_bucket_ids, output_dtype=output_dtype)

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
        return _observations.encode_observations(
            self, timestamps, values, mask, spec=spec, profile=profile,
            state=state, content=content, channel_names=channel_names,
            output_dtype=output_dtype, time_unit=time_unit,
            blocks=_blocks(content_block, time, time2vec, gaps, calendar,
                           combine, d_model))

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
        return _observations.encode_events(
            self, times, channels, values, spec=spec, profile=profile,
            state=state, num_channels=num_channels,
            channel_names=channel_names, content=content,
            output_dtype=output_dtype, time_unit=time_unit,
            blocks=_blocks(content_block, time, time2vec, gaps, calendar,
                           combine, d_model))

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
        return _streams.encode_observations_stream(
            self, chunks, spec=spec, profile=profile,
            output_dtype=output_dtype, time_unit=time_unit,
            blocks=_blocks(content_block, time, time2vec, gaps, calendar,
                           combine, d_model))

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
        return _panel_calls.encode_panel(
            self, timestamps, values, mask, series_offsets=series_offsets,
            series_ids=series_ids, time_zones=time_zones,
            time_zone_index=time_zone_index, states=states, spec=spec,
            profile=profile, output_dtype=output_dtype, content=content,
            channel_names=channel_names, event_times=event_times,
            event_channels=event_channels, event_values=event_values,
            num_channels=num_channels, max_in_flight=max_in_flight,
            time_unit=time_unit,
            blocks=_blocks(content_block, time, time2vec, gaps, calendar,
                           combine, d_model))

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
        return _streams.encode_panel_stream(
            self, chunks, time_zones=time_zones,
            time_zone_index=time_zone_index, states=states, spec=spec,
            profile=profile, output_dtype=output_dtype,
            channel_names=channel_names, num_channels=num_channels,
            time_unit=time_unit,
            blocks=_blocks(content_block, time, time2vec, gaps, calendar,
                           combine, d_model))

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
            blocks=_blocks(content_block, time, time2vec, gaps, calendar,
                           combine, d_model))

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
        return _positional.describe(
            self, dim=dim, rotary_dim=rotary_dim, base=base, spec=spec,
            profile=profile, num_offsets=num_offsets,
            offset_step=offset_step, seq_len=seq_len)

    def list_profiles(self) -> List[pb.ProfileInfo]:
        """The server's profiles (phasor.v1.ProfileInfo messages)."""
        return list(self._call(self._stub.ListProfiles,
                               pb.ListProfilesRequest()).profiles)

    def echo(self, payload: bytes) -> bytes:
        """The payload back; needs a server started with --enable_echo."""
        return self._call(self._stub.Echo,
                          pb.EchoRequest(payload=payload)).payload

    def health(self, service: str = "") -> str:
        """"SERVING", "NOT_SERVING", ... for the server ("") or a service."""
        return _channel.health(self, service)

    def watch_health(self, service: str = ""
                     ) -> Iterator[_health.HealthCheckResponse]:
        """The grpc.health.v1 Watch call: iterates over HealthCheckResponse
        messages (serving_status_name(r.status)) as the status changes.

        The call is bounded by the client's deadline; its cancel() ends the
        watch early.
        """
        return _channel.watch_health(self, service)

    def list_services(self) -> List[str]:
        """Service names the server registers, via gRPC server reflection."""
        return _channel.list_services(self)

    def file_containing_symbol(self, symbol: str) -> List[bytes]:
        """Serialized FileDescriptorProtos declaring `symbol`, via
        reflection (e.g. "phasor.v1.Encoder")."""
        return _channel.file_containing_symbol(self, symbol)
