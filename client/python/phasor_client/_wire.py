"""Replies whose large tensors stay in the bytes gRPC delivered.

Parsing a reply the usual way copies each tensor's `data` three times after
gRPC hands over the message's bytes: protobuf parses it into its own string,
reading the field makes a Python `bytes` of it, and the caller's numpy array
is built on that. For a 64 MiB reply those copies, each into freshly faulted
memory, cost more than the transport. Here a reply's top-level `Tensor`
fields of DETACH_BYTES or more are found by walking the wire format
(https://protobuf.dev/programming-guides/encoding/), and their `data` becomes
a memoryview of the delivered bytes; protobuf parses the rest. The server
detaches the same tensors when it serializes a reply
(SerializeWithinLimit, server/encoder_service.cc).

The result, Reply, reads like the message: attribute access, HasField and
ByteSize behave as on the parsed message, and a detached field reads as a
DetachedTensor (shape, dtype, data as a read-only memoryview), which
tensors.from_tensor accepts like a phasor.v1.Tensor. Anything this walker
does not expect — a tensor field given twice (protobuf would merge the two),
an unknown wire type, a truncated message — is left to protobuf, which parses
it (or raises) exactly as without this module.

Requests go the same way in reverse: an Outgoing holds the request without
its large tensors and appends each, from the caller's array, as a field of
its own when gRPC serializes it. Protobuf merges a message field given more
than once, so the server parses the very request the message would have
been; the array's bytes are copied once, into the serialized request,
instead of into a `bytes`, the Tensor, the request and its serialization.
"""

from typing import Any, Callable, Dict, List, Sequence, Tuple

from google.protobuf import descriptor as _descriptor

# Tensors below this stay in the message: copying them is cheaper than the
# walk. The server detaches from 64 KiB too.
DETACH_BYTES = 64 * 1024

_TENSOR_MESSAGE = "phasor.v1.Tensor"
_VARINT, _FIXED64, _LENGTH, _FIXED32 = 0, 1, 2, 5
# phasor.v1.Tensor's fields.
_TENSOR_SHAPE, _TENSOR_DTYPE, _TENSOR_DATA = 1, 2, 3


class DetachedTensor:
    """A phasor.v1.Tensor whose `data` is a view of the reply's bytes."""

    __slots__ = ("shape", "dtype", "data")

    def __init__(self, shape: Tuple[int, ...], dtype: int,
                 data: memoryview) -> None:
        self.shape = shape
        self.dtype = dtype
        self.data = data


class Reply:
    """A parsed reply whose large tensors are DetachedTensors."""

    __slots__ = ("_message", "_tensors", "_size")

    def __init__(self, message: Any, tensors: Dict[str, DetachedTensor],
                 size: int) -> None:
        self._message = message
        self._tensors = tensors
        self._size = size

    def __getattr__(self, name: str) -> Any:
        tensor = self._tensors.get(name)
        return tensor if tensor is not None else getattr(self._message, name)

    def HasField(self, name: str) -> bool:  # noqa: N802 (protobuf's name)
        return name in self._tensors or self._message.HasField(name)

    def ByteSize(self) -> int:  # noqa: N802 (protobuf's name)
        """The size of the message on the wire."""
        return self._size


def _varint(wire: bytes, pos: int) -> Tuple[int, int]:
    """(value, position after it) of the varint at wire[pos]."""
    value = shift = 0
    while True:
        byte = wire[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _fields(wire: bytes, begin: int, end: int):
    """(number, wire type, field start, payload start, field end) of each
    field in wire[begin:end]; raises ValueError where the walk cannot go on
    (protobuf then reports the real problem)."""
    pos = begin
    while pos < end:
        start = pos
        key, pos = _varint(wire, pos)
        number, wire_type = key >> 3, key & 7
        if wire_type == _VARINT:
            _, after = _varint(wire, pos)
        elif wire_type == _FIXED64:
            after = pos + 8
        elif wire_type == _FIXED32:
            after = pos + 4
        elif wire_type == _LENGTH:
            length, pos = _varint(wire, pos)
            after = pos + length
        else:
            raise ValueError(f"wire type {wire_type}")
        if after > end:
            raise ValueError("truncated")
        yield number, wire_type, start, pos, after
        pos = after


def _detach_tensor(tensor_class: Any, view: memoryview, wire: bytes,
                   begin: int, end: int) -> DetachedTensor:
    """The Tensor message in wire[begin:end], its data left in place."""
    rest = []
    data = None
    run = begin
    for number, wire_type, start, payload, after in _fields(wire, begin, end):
        if number == _TENSOR_DATA and wire_type == _LENGTH:
            if data is not None:
                raise ValueError("data given twice")
            data = view[payload:after]
            rest.append(view[run:start])
            run = after
    rest.append(view[run:end])
    header = tensor_class.FromString(b"".join(rest))
    return DetachedTensor(tuple(header.shape), header.dtype,
                          data if data is not None else view[0:0])


def detaching(response_class: Any,
              tensor_class: Any) -> Callable[[bytes], Any]:
    """A gRPC response deserializer for `response_class` (whose tensors are
    `tensor_class`, phasor.v1.Tensor): a Reply when the message holds a
    large top-level Tensor, else the parsed message."""
    tensor_fields = {
        field.number: field.name
        for field in response_class.DESCRIPTOR.fields
        if field.message_type is not None
        and field.message_type.full_name == _TENSOR_MESSAGE
        and field.label != _descriptor.FieldDescriptor.LABEL_REPEATED}

    def deserialize(wire: bytes) -> Any:
        if not tensor_fields or len(wire) < DETACH_BYTES:
            return response_class.FromString(wire)
        view = memoryview(wire)
        tensors: Dict[str, DetachedTensor] = {}
        seen = set()
        rest = []
        run = 0
        try:
            for number, wire_type, start, payload, after in _fields(
                    wire, 0, len(wire)):
                name = tensor_fields.get(number)
                if name is None:
                    continue
                if number in seen or wire_type != _LENGTH:
                    raise ValueError("merged or malformed tensor field")
                seen.add(number)
                if after - payload < DETACH_BYTES:
                    continue
                tensors[name] = _detach_tensor(tensor_class, view, wire,
                                               payload, after)
                rest.append(view[run:start])
                run = after
        except (ValueError, IndexError):
            return response_class.FromString(wire)
        if not tensors:
            return response_class.FromString(wire)
        rest.append(view[run:])
        message = response_class.FromString(b"".join(rest))
        return Reply(message, tensors, len(wire))

    return deserialize


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _key(number: int, wire_type: int) -> bytes:
    return _encode_varint(number << 3 | wire_type)


class Outgoing:
    """A request whose large tensors are appended, straight from their
    arrays, when it is serialized. Reads like the message (attribute
    access), whose large tensors set by attach() are not in it."""

    __slots__ = ("message", "_tail")

    def __init__(self, message: Any) -> None:
        self.message = message
        self._tail: List[Tuple[bytes, memoryview]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.message, name)

    def attach(self, path: str, shape: Sequence[int], dtype: int,
               data: Any) -> None:
        """Sets the phasor.v1.Tensor at `path` (field names from the
        request down, "observations.values") to `shape`, `dtype` and the
        bytes of `data` (bytes, or a C-contiguous array already in the wire
        format): appended at serialization from DETACH_BYTES on, else set in
        the message. The field must not be set already: protobuf would merge
        the two."""
        names = path.split(".")
        descriptor = self.message.DESCRIPTOR
        holder = self.message
        numbers = []
        for name in names:
            field = descriptor.fields_by_name[name]
            numbers.append(field.number)
            if holder is not None:
                holder = (getattr(holder, name) if holder.HasField(name)
                          else None)
            descriptor = field.message_type
        if holder is not None:
            raise ValueError(f"{path} is already set in the request")
        view = memoryview(data)
        if view.nbytes < DETACH_BYTES:
            tensor = self.message
            for name in names:
                tensor = getattr(tensor, name)
            tensor.shape.extend(int(n) for n in shape)
            tensor.dtype = int(dtype)
            tensor.data = view.tobytes()
            return
        view = view.cast("B")
        header = []
        if len(shape):
            packed = b"".join(_encode_varint(int(n)) for n in shape)
            header += [_key(_TENSOR_SHAPE, _LENGTH),
                       _encode_varint(len(packed)), packed]
        if dtype:
            header += [_key(_TENSOR_DTYPE, _VARINT), _encode_varint(int(dtype))]
        header += [_key(_TENSOR_DATA, _LENGTH), _encode_varint(view.nbytes)]
        inner = b"".join(header)
        size = len(inner) + view.nbytes
        # The enclosing fields, innermost first, each a length prefix.
        for number in reversed(numbers):
            prefix = _key(number, _LENGTH) + _encode_varint(size)
            inner = prefix + inner
            size += len(prefix)
        self._tail.append((inner, view))

    def SerializeToString(self) -> bytes:  # noqa: N802 (protobuf's name)
        pieces: List[Any] = [self.message.SerializeToString()]
        for prefix, view in self._tail:
            pieces += [prefix, view]
        return b"".join(pieces)

    def ByteSize(self) -> int:  # noqa: N802 (protobuf's name)
        return self.message.ByteSize() + sum(
            len(prefix) + view.nbytes for prefix, view in self._tail)


def serialize(request: Any) -> bytes:
    """A gRPC request serializer for messages and Outgoing requests."""
    return request.SerializeToString()
