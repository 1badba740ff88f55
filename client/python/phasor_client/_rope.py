"""apply_rope's operands: the caller's shapes, layouts and array types on one
side, ApplyRope's [T, H, D] tokens on the other.

A batch that fits one message travels as the caller laid it out: the
server takes [T, H, D], [B, T, H, D] and [B, H, T, D] (HF transformers'
layout; [H, T, D] goes as B = 1) with positions [T] or [B, T] (HF's
position_ids), so nothing is transposed on either side (whole_tensor,
whole_positions, result(as_sent=True)). A batch larger than one message is
cut along its B·T tokens in row-major (b, t) order (tokens_per_call), each
piece a gather of whole or partial batch rows sent as [tokens, H, D], and
the replies are copied into one array; seq_len must then be pinned
(default_seq_len).

Copies, per tensor and direction (the wire needs contiguous little-endian
bytes; protobuf and gRPC add their own copies beyond our reach):
  send     one: ndarray.tobytes() gathers a transposed view in one pass
           (plus one cast when the wire dtype differs from the caller's).
  receive  none for numpy: a read-only view over the reply's bytes, in the
           caller's layout (so possibly not C-contiguous). One for torch:
           torch must not share the reply's immutable bytes, so the
           transposing copy also makes the tensor writable and contiguous.

dtypes. The wire dtype is the caller's unless `dtype=` asks for another:
  float32 / float16 (numpy or torch)  -> FLOAT32 / FLOAT16
  torch.bfloat16                      -> BFLOAT16, its bits as they are
  numpy uint16 with dtype="bfloat16"  -> BFLOAT16 bits (numpy has no bf16)
  float64 (numpy or torch)            -> FLOAT64, rotated in double;
                                         dtype="float32" rounds it on
                                         purpose (result widened back)
  anything else (ints, uint16 alone)  -> an error saying what to send
Results come back as the caller's type: numpy in, numpy out; torch in,
torch out (same dtype and device; no autograd graph).

The calls (apply_rope, rope_tables: the bodies of EncoderClient's methods,
at the end of this file) send what the functions above prepared: one
ApplyRope call, or the pieces with up to _panel.MAX_IN_FLIGHT in flight,
joined in order.

Thread-safety: pure functions over their arguments; the calls use the
client's channel, which threads may share.
"""

import collections
import sys
from typing import Any, List, NamedTuple, Optional, Sequence, Tuple

import grpc
import numpy as np

from . import _panel, _wire
from ._requests import rope_spec, set_config, to_positions
from ._types import RopeResult, RopeTables
from .errors import InvalidInputError, PhasorError
from .tensors import _bfloat16_bits, dtype_enum, from_tensor, pb, to_tensor

# A numpy array (or anything np.asarray takes) or a torch.Tensor.
ArrayLike = Any

# Axis names of the accepted tensor layouts; "d" is the head dimension.
TENSOR_LAYOUTS = ("bhtd", "bthd", "thd", "htd")
# RopeSpec pairings, the older meaning of apply_rope's `layout=`.
PAIRINGS = ("half", "interleaved", "layout_unspecified")

_WIRE_NUMPY = {pb.FLOAT32: np.dtype("<f4"), pb.FLOAT16: np.dtype("<f2"),
               pb.BFLOAT16: np.dtype("<u2"), pb.FLOAT64: np.dtype("<f8")}


def _refused(field: str, description: str) -> InvalidInputError:
    """What apply_rope raises for input it will not send: INVALID_ARGUMENT
    naming the argument (also a ValueError and a TypeError)."""
    return InvalidInputError(field, description)


def _torch_module():
    """torch if the caller has imported it (we never import it ourselves)."""
    return sys.modules.get("torch")


def is_torch(value: Any) -> bool:
    torch = _torch_module()
    return torch is not None and isinstance(value, torch.Tensor)


def to_numpy(value: Any) -> np.ndarray:
    """A numpy view of a CPU torch tensor (a copy for other devices), else
    np.asarray(value). For positions, whose dtype needs no bf16 care."""
    if is_torch(value):
        return value.detach().cpu().numpy()
    return np.asarray(value)


class Operand(NamedTuple):
    """One caller tensor, seen as the wire's [T, H, D] tokens."""
    name: str            # "query" or "key", for messages
    array: np.ndarray    # the caller's values (bf16 as uint16 bits)
    source: str          # "float32", "float16", "bfloat16", "float64", ...
    torch_dtype: Any     # the caller's torch dtype, None for numpy
    device: Any          # the caller's torch device, None for numpy
    from_sequence: bool  # not an array: np.asarray chose the dtype
    layout: str          # one of TENSOR_LAYOUTS
    batch: int           # B (1 without a batch axis)
    tokens: int          # T
    heads: int           # H
    head_dim: int        # D


def _source(name: str, value: Any) -> Tuple[np.ndarray, str, Any, Any]:
    """(numpy view, element type name, torch dtype, torch device)."""
    if is_torch(value):
        torch = _torch_module()
        tensor = value.detach()
        device = tensor.device
        if device.type != "cpu":
            tensor = tensor.cpu()
        if tensor.dtype == torch.bfloat16:
            # Same-size dtype views work for any strides: no copy.
            return (tensor.view(torch.int16).numpy().view(np.uint16),
                    "bfloat16", value.dtype, device)
        if tensor.dtype in (torch.float32, torch.float16, torch.float64):
            return (tensor.numpy(), str(tensor.dtype).replace("torch.", ""),
                    value.dtype, device)
        raise _refused(name, f"is a torch tensor of {tensor.dtype}; send "
                       f"torch.float32, torch.float16, torch.bfloat16 or "
                       f"torch.float64")
    array = np.asarray(value)
    kind = array.dtype
    if kind == np.float32 or kind == np.float16 or kind == np.float64:
        return array, kind.name, None, None
    if kind == np.uint16:
        return array, "uint16", None, None
    raise _refused(name, f"has dtype {kind}; send float32, float16 or "
                   f"float64 arrays, bfloat16 bits as uint16 with "
                   f"dtype=\"bfloat16\", or torch tensors")


def wire_dtype(query: Operand, dtype: Any) -> int:
    """The phasor.v1.DType both tensors travel as (see the module doc)."""
    if dtype is not None:
        wire = dtype_enum(dtype)
        if wire not in _WIRE_NUMPY:
            raise _refused("dtype", f"{dtype!r}: give \"float32\", "
                           f"\"float16\", \"bfloat16\" or \"float64\"")
        if query.source == "uint16" and wire != pb.BFLOAT16:
            raise _refused(query.name, "is uint16; only dtype=\"bfloat16\" "
                           "reads it (as bfloat16 bits)")
        if query.source == "bfloat16" and wire != pb.BFLOAT16:
            # The server widens bf16 to float32 for the rotation anyway: a
            # wider wire would only cost bytes.
            raise _refused(query.name, "is torch.bfloat16, which travels as "
                           "bfloat16; drop dtype= or convert the tensor "
                           "first")
        return wire
    if query.source == "uint16":
        raise _refused(query.name,
                       "is uint16: if it holds bfloat16 bits pass "
                       "dtype=\"bfloat16\"; numbers send as float32 or "
                       "float16")
    return dtype_enum(query.source)


def operand(name: str, value: Any, layout: Optional[str]) -> Operand:
    """Reads a query or key of rank 3 or 4 in `layout` (None: "bhtd" for
    rank 4, "thd" for rank 3)."""
    array, source, torch_dtype, device = _source(name, value)
    if array.ndim not in (3, 4):
        raise _refused(name,
                       f"has shape {tuple(array.shape)}; expected "
                       f"[B, H, T, D] (layout \"bhtd\", the default for 4 "
                       f"axes), [B, T, H, D] (\"bthd\"), [T, H, D] (\"thd\","
                       f" the default for 3) or [H, T, D] (\"htd\")")
    if layout is None:
        layout = "bhtd" if array.ndim == 4 else "thd"
    if len(layout) != array.ndim:
        raise _refused(name,
                       f"has {array.ndim} axes {tuple(array.shape)} "
                       f"but layout \"{layout}\" names {len(layout)}")
    sizes = dict(zip(layout, array.shape))
    from_sequence = torch_dtype is None and not isinstance(value, np.ndarray)
    return Operand(name, array, source, torch_dtype, device, from_sequence,
                   layout, sizes.get("b", 1), sizes["t"], sizes["h"],
                   sizes["d"])


def check_key(query: Operand, key: Operand) -> None:
    """Key must match the query's layout, type, B, T and D; its head count
    may differ (grouped-query / multi-query attention)."""
    if key.source != query.source or key.torch_dtype != query.torch_dtype:
        key_kind = "torch" if key.torch_dtype else "numpy"
        query_kind = "torch" if query.torch_dtype else "numpy"
        raise _refused("key", f"is {key.source} ({key_kind}), query "
                       f"{query.source} ({query_kind}); send both alike")
    if key.array.ndim != query.array.ndim:
        raise _refused("key", f"has shape {tuple(key.array.shape)}, query "
                       f"{tuple(query.array.shape)}: same axes needed")
    for axis, query_size, key_size in (("B", query.batch, key.batch),
                                       ("T", query.tokens, key.tokens),
                                       ("D", query.head_dim, key.head_dim)):
        if query_size != key_size:
            raise _refused("key",
                           f"has shape {tuple(key.array.shape)}, query "
                           f"{tuple(query.array.shape)} (layout "
                           f"\"{query.layout}\"): {axis} must match "
                           f"({key_size} != {query_size}); only the head "
                           f"count may differ")


def _to_tokens(array: np.ndarray, layout: str) -> np.ndarray:
    """A view in (b, t, h, d) axis order (b absent without a batch)."""
    order = [layout.index(axis) for axis in "bthd" if axis in layout]
    return array.transpose(order)


def _wire_bytes(values: np.ndarray, source: str, wire: int) -> np.ndarray:
    """`values` as `wire`, C-contiguous and little-endian: at most one
    gather (none when `values` already is so)."""
    if source in ("bfloat16", "uint16"):  # wire_dtype: BFLOAT16
        return np.ascontiguousarray(values, dtype="<u2")
    if wire == pb.BFLOAT16:
        return _bfloat16_bits(values.astype(np.float32, copy=False))
    return np.ascontiguousarray(values, dtype=_WIRE_NUMPY[wire])


def attach_tokens(request: Any, field: str, item: Operand, wire: int,
                  begin: int = 0, end: Optional[int] = None) -> None:
    """Sets the request's (an _wire.Outgoing) `field` to tokens [begin,
    end) of the B·T as [end - begin, H, D] in `wire`."""
    shape, data = _token_bytes(item, wire, begin, end)
    request.attach(field, shape, wire, data)


def _token_bytes(item: Operand, wire: int, begin: int,
                 end: Optional[int]) -> Tuple[List[int], Any]:
    """(shape [end - begin, H, D], their bytes in `wire`: a C-contiguous
    array or bytes) of tokens [begin, end) of the B·T."""
    total = item.batch * item.tokens
    end = total if end is None else end
    tokens = _to_tokens(item.array, item.layout)
    if "b" not in item.layout:
        tokens = tokens[None]
    if begin == 0 and end == total:
        data = _wire_bytes(tokens, item.source, wire)
    else:
        # A cut of the flattened (b, t) axis: whole or partial batch rows.
        pieces = []
        position = begin
        while position < end:
            row, first = divmod(position, item.tokens)
            last = min(item.tokens, first + end - position)
            pieces.append(_wire_bytes(tokens[row, first:last], item.source,
                                      wire))
            position += last - first
        data = b"".join(pieces)
    return [end - begin, item.heads, item.head_dim], data


# ApplyRopeRequest.TensorLayout of each caller layout sent whole.
_SERVER_LAYOUT = {"thd": "TOKENS_HEADS_DIM", "bthd": "BATCH_SEQ_HEADS_DIM",
                  "bhtd": "BATCH_HEADS_SEQ_DIM", "htd": "BATCH_HEADS_SEQ_DIM"}


def server_layout(item: Operand) -> int:
    """The ApplyRopeRequest.tensor_layout that reads `item` as it is."""
    return pb.ApplyRopeRequest.TensorLayout.Value(_SERVER_LAYOUT[item.layout])


def attach_whole(request: Any, field: str, item: Operand, wire: int) -> None:
    """Sets the request's (an _wire.Outgoing) `field` to the caller's
    array in its own layout ([H, T, D] as [1, H, T, D]): at most one gather
    of its bytes, no transpose."""
    array = item.array[None] if item.layout == "htd" else item.array
    request.attach(field, list(array.shape), wire,
                   _wire_bytes(array, item.source, wire))


def whole_positions(query: Operand, flat: Optional[np.ndarray]) -> Any:
    """phasor.v1.Positions for the whole batch: a range (B = 1, default),
    [T] without a batch axis, else [B, T]."""
    message = positions_message(flat, 0, query.batch * query.tokens)
    if flat is not None and "b" in query.layout:
        del message.values.shape[:]
        message.values.shape.extend([query.batch, query.tokens])
    return message


def reply_array(reply: Any) -> np.ndarray:
    """A reply tensor's values, flat, in its wire dtype (no copy)."""
    return np.frombuffer(reply.data, dtype=_WIRE_NUMPY[reply.dtype])


def empty_tokens(item: Operand, wire: int) -> np.ndarray:
    """A writable flat array for all B·T tokens of `item` in `wire`."""
    return np.empty(item.batch * item.tokens * item.heads * item.head_dim,
                    dtype=_WIRE_NUMPY[wire])


def result(item: Operand, flat: np.ndarray, wire: int,
           as_sent: bool = False) -> Any:
    """The rotated tensor in the caller's type, shape and layout, from its
    values flat in `wire`: in the caller's own layout when `as_sent`
    (whole_tensor), else its tokens in (b, t, h, d) order (a view where it
    can)."""
    if as_sent:
        view = flat.reshape(item.array.shape)
    else:
        canonical = [axis for axis in "bthd" if axis in item.layout]
        sizes = {"b": item.batch, "t": item.tokens, "h": item.heads,
                 "d": item.head_dim}
        # Back from (b, t, h, d) order to the caller's axes, as a view.
        view = flat.reshape([sizes[axis] for axis in canonical]).transpose(
            [canonical.index(axis) for axis in item.layout])
    caller_bits = item.source in ("bfloat16", "uint16")
    if wire == pb.BFLOAT16 and not caller_bits:
        # bf16 -> float32 is exact: the bits are float32's upper half.
        view = (view.astype(np.uint32) << 16).view(np.float32)
    if item.torch_dtype is None:
        if caller_bits:
            return view
        return view.astype(item.source, copy=False)
    torch = _torch_module()
    if caller_bits:
        out = torch.from_numpy(np.array(view, dtype=np.int16, order="C"))
        out = out.view(torch.bfloat16)
    else:
        out = torch.from_numpy(np.array(view, dtype=item.source, order="C"))
    return out if item.device.type == "cpu" else out.to(item.device)


def flat_positions(query: Operand, positions: Any) -> Optional[np.ndarray]:
    """The B·T positions, flat in (b, t) order: None = 0..T-1 in every row;
    [T] or [1, T] shared by the rows; [B, T] one row each (HF
    position_ids). Returns None for the default with B = 1 (a range)."""
    batch, tokens = query.batch, query.tokens
    if positions is None:
        if batch == 1:
            return None
        return np.tile(np.arange(tokens, dtype=np.int64), batch)
    values = to_numpy(positions)
    if values.dtype == np.bool_ or not (
            np.issubdtype(values.dtype, np.integer)
            or np.issubdtype(values.dtype, np.floating)):
        raise _refused("positions", f"have dtype {values.dtype}; "
                       f"send integers (token indices) or reals "
                       f"(continuous time)")
    shape = tuple(values.shape)
    if shape == (tokens,) or shape == (1, tokens):
        values = values.reshape(-1)
        return np.tile(values, batch) if batch > 1 else values
    if shape == (batch, tokens) and "b" in query.layout:
        return values.reshape(-1)
    expected = (f"[T] = ({tokens},), [1, T] or [B, T] = ({batch}, {tokens})"
                if "b" in query.layout else f"[T] = ({tokens},)")
    raise _refused("positions", f"have shape {shape}; expected "
                   f"{expected} for query {tuple(query.array.shape)} "
                   f"(layout \"{query.layout}\")")


def positions_message(flat: Optional[np.ndarray], begin: int,
                      end: int) -> Any:
    """phasor.v1.Positions for tokens [begin, end). Integers travel as
    INT64, reals as FLOAT64 (continuous-time RoPE)."""
    if flat is None:
        return pb.Positions(range=pb.Positions.Range(start=begin,
                                                     count=end - begin))
    values = flat[begin:end]
    integral = np.issubdtype(values.dtype, np.integer)
    return pb.Positions(
        values=to_tensor(values, "int64" if integral else "float64"))


def default_seq_len(flat: Optional[np.ndarray], total: int) -> int:
    """The server's seq_len for a spec without one, 1 + the largest position
    (DefaultRopeSeqLen in core/rope.cc), which a cut request must pin so
    that every piece scales (dynamic, longrope) as the whole would."""
    if flat is None:
        return max(1, total)
    if flat.size == 0:
        return 1
    if np.issubdtype(flat.dtype, np.integer):
        largest = int(flat.max())
        return max(1, min(largest, (1 << 63) - 2) + 1)
    length = np.floor(float(np.max(flat))) + 1.0
    if length >= 2.0**62:
        return 1 << 62
    return int(length) if length > 1.0 else 1


def tokens_per_call(query: Operand, key: Optional[Operand], wire: int,
                    max_bytes: int, max_elements: int) -> int:
    """Tokens one ApplyRope call may carry: query and key (and the reply,
    as large) within max_bytes, their elements within max_elements."""
    heads = query.heads + (key.heads if key is not None else 0)
    elements_per_token = max(1, heads * query.head_dim)
    # Plus one int64 / float64 position per token.
    bytes_per_token = elements_per_token * _WIRE_NUMPY[wire].itemsize + 8
    return max(1, min(max_elements // elements_per_token,
                      max_bytes // bytes_per_token))


def split_layout(layout: Optional[str], tensor_layout: Optional[str]
                 ) -> Tuple[Optional[str], Optional[str]]:
    """(pairing, tensor layout) from apply_rope's `layout=` and
    `tensor_layout=`: `layout` takes either kind, the names are disjoint."""
    pairing = None
    if tensor_layout is not None:
        tensor_layout = tensor_layout.lower()
        if tensor_layout not in TENSOR_LAYOUTS:
            raise _refused("tensor_layout", f"{tensor_layout!r}: "
                           f"give one of {', '.join(TENSOR_LAYOUTS)}")
    if layout is None or not isinstance(layout, str):
        return layout, tensor_layout
    if layout.lower() in TENSOR_LAYOUTS:
        if tensor_layout is not None and tensor_layout != layout.lower():
            raise _refused("layout", f"{layout!r} and "
                           f"tensor_layout {tensor_layout!r} disagree")
        return pairing, layout.lower()
    if layout.lower() in PAIRINGS:
        return layout, tensor_layout
    raise _refused("layout", f"{layout!r}: a tensor layout "
                   f"({', '.join(TENSOR_LAYOUTS)}) or a RoPE pairing "
                   f"(\"half\", \"interleaved\")")


# --- The calls ---------------------------------------------------------------


def apply_rope(client, query, key, positions, *, position_ids, rotary_dim,
               base, layout, tensor_layout, scaling, fold_attention_factor,
               max_position_embeddings, seq_len, profile, spec, dtype):
    """EncoderClient.apply_rope."""
    pairing, tensor_layout = split_layout(layout, tensor_layout)
    if positions is not None and position_ids is not None:
        raise InvalidInputError("position_ids",
                                "give positions= or position_ids=, "
                                "not both")
    if position_ids is not None:
        positions = position_ids
    query_operand = operand("query", query, tensor_layout)
    key_operand = None
    if key is not None:
        key_operand = operand("key", key, query_operand.layout)
        check_key(query_operand, key_operand)
    wire = wire_dtype(query_operand, dtype)
    flat = flat_positions(query_operand, positions)
    config = pb.ApplyRopeRequest()
    set_config(config, profile, spec, lambda: rope_spec(
        rotary_dim, base, pairing, scaling, fold_attention_factor,
        max_position_embeddings, seq_len))
    total = query_operand.batch * query_operand.tokens
    per_call = tokens_per_call(
        query_operand, key_operand, wire,
        _panel.call_bytes(client.max_message_bytes), _panel.PIECE_ELEMENTS)
    if total <= per_call:
        # One call, in the caller's own layout: nothing is transposed.
        request = pb.ApplyRopeRequest(
            positions=whole_positions(query_operand, flat),
            tensor_layout=server_layout(query_operand))
        request.MergeFrom(config)
        request = _wire.Outgoing(request)
        attach_whole(request, "query", query_operand, wire)
        if key_operand is not None:
            attach_whole(request, "key", key_operand, wire)
        response = client._call(client._stub.ApplyRope, request)
        return RopeResult(
            result(query_operand, reply_array(response.query), wire,
                   as_sent=True),
            result(key_operand, reply_array(response.key), wire,
                   as_sent=True)
            if key_operand is not None else None,
            response.attention_factor)
    return _apply_rope_split(client, config, query_operand, key_operand,
                             wire, flat, per_call)


def _apply_rope_split(client, config, query_operand, key_operand, wire,
                      flat, per_call):
    """apply_rope over several calls of at most per_call tokens each,
    max_in_flight at once, joined in order: the same numbers as one
    call, since each token's rotation depends on its position and the
    frequencies only, and seq_len is pinned to the whole batch's."""
    total = query_operand.batch * query_operand.tokens
    if config.HasField("profile"):
        # A profile's seq_len default would be each piece's: inline it.
        found = [p for p in client.list_profiles()
                 if p.name == config.profile]
        if found and found[0].spec.HasField("rope"):
            config = pb.ApplyRopeRequest(spec=found[0].spec)
    if config.HasField("spec") and config.spec.HasField("rope") and \
            config.spec.rope.seq_len == 0:
        config.spec.rope.seq_len = default_seq_len(flat, total)
    outputs = [empty_tokens(query_operand, wire)]
    if key_operand is not None:
        outputs.append(empty_tokens(key_operand, wire))
    operands = [query_operand, key_operand]
    factors = []

    def send(begin, end):
        request = pb.ApplyRopeRequest(
            positions=positions_message(flat, begin, end))
        request.MergeFrom(config)
        request = _wire.Outgoing(request)
        attach_tokens(request, "query", query_operand, wire, begin, end)
        if key_operand is not None:
            attach_tokens(request, "key", key_operand, wire, begin, end)
        return client._stub.ApplyRope.future(
            request, timeout=client.deadline_seconds,
            metadata=client._metadata)

    def receive(begin, end, response):
        for out, reply, item in zip(outputs, (response.query,
                                              response.key), operands):
            width = item.heads * item.head_dim
            out[begin * width:end * width] = reply_array(reply)
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
        result(query_operand, outputs[0], wire),
        result(key_operand, outputs[1], wire)
        if key_operand is not None else None,
        factors[0])


def rope_tables(client, positions, *, count, start, step, rotary_dim, base,
                layout, scaling, fold_attention_factor,
                max_position_embeddings, seq_len, profile, spec,
                output_dtype):
    """EncoderClient.rope_tables."""
    if positions is not None:
        positions = to_numpy(positions)
    request = pb.RopeTablesRequest(
        positions=to_positions(positions, count, start, step),
        output_dtype=dtype_enum(output_dtype))
    set_config(request, profile, spec, lambda: rope_spec(
        rotary_dim, base, layout, scaling, fold_attention_factor,
        max_position_embeddings, seq_len))
    response = client._call(client._stub.RopeTables, request)
    return RopeTables(from_tensor(response.cos), from_tensor(response.sin),
                      response.attention_factor, list(response.inv_freq))


__all__: Sequence[str] = (
    "TENSOR_LAYOUTS", "operand", "check_key", "wire_dtype", "attach_tokens",
    "reply_array", "empty_tokens", "result", "flat_positions",
    "positions_message", "default_seq_len", "tokens_per_call",
    "split_layout", "to_numpy", "is_torch", "apply_rope", "rope_tables")
