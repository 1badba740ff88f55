"""SharedMemorySession: the large calls with their tensors in POSIX shared
memory, for a client on the server's host.

    with EncoderClient("unix:/run/phasor.sock") as client:
        with client.shared_memory() as shm:
            q, k, factor = shm.apply_rope(query, key, profile="llama-rope")
            panel = shm.encode_panel(timestamps, values,
                                     series_offsets=offsets, profile="vitals")

What travels where: the calls are the Open Inference Protocol's ModelInfer
(inference.GRPCInferenceService, served beside phasor.v1.Encoder; the model
is the profile, so a call names `profile=` and takes no inline spec), with
Triton's system shared-memory extension: every input is written into one
shared-memory region the session owns, and every tensor output the call
sizes in advance (rotated query and key; panel features) is written there by
the server, so the gRPC messages carry only names, shapes and offsets. The
outputs are those of EncoderClient.apply_rope / encode_panel for the same
profile and inputs, byte for byte (the server runs the same handler).

The region: one POSIX shared-memory object per session, named
<key_prefix>_<pid>_<random>_<n> (the server opens only keys under its
--shared_memory_key_prefix, "/phasor" by default), created mode 0600,
registered with SystemSharedMemoryRegister under the same name without the
slash. It is reused call after call and replaced by a larger one (2x, at
least what the call needs) when a call does not fit; close() unregisters
and unlinks it. On Linux the object is the file /dev/shm/<key without "/">.
A session dropped without close() unlinks its object when it is garbage
collected or the interpreter exits (the server's registration then remains
until its Unregister or restart).

Results are numpy views of the region by default (copy=False): no copy of
the outputs is made, and a view is valid until the next call on the session
or close(), whichever comes first -- the next call writes its own inputs and
outputs over the same bytes. A view never dangles: after the region is
replaced or closed, a view keeps the old mapping alive (its bytes then stay
what they were). Pass copy=True (to the session or a call) for arrays the
caller owns. Views are read-only, like the replies of the native calls.

Inputs without a copy: session.array(name, shape, dtype) hands out a
writable numpy array in a shared-memory region of its own (one per name,
registered once and reused while the shape fits), and a call given such an
array (as is: same dtype, C-contiguous) points the server at it instead of
copying it into the call's region. Filling the array is then the caller's
only copy -- or none, when the data is produced in it. The array is valid
until close() or until array() is asked for the same name with a larger
size; the server reads it during the call, so it must not be written while
a call that uses it runs.

Errors: the server's as PhasorError (errors.py), naming the
ModelInferRequest's fields (inputs[query].shape, ...); a server started
without --system_shared_memory=true refuses the registration, which raises
PhasorError with the server's code and a message saying how to enable it.

Thread-safety: a session makes one call at a time (a lock serializes them,
since every call reuses the one region); use one session per thread for
concurrent calls. The EncoderClient it came from may be shared as usual, and
closing it closes its sessions.
"""

from __future__ import annotations

import json
import mmap
import os
import secrets
import threading
import weakref
from typing import (TYPE_CHECKING, Any, Dict, List, Mapping, NamedTuple,
                    Optional, Sequence, Tuple)

import grpc
import numpy as np

from . import _panel, _panel_calls
from . import frame as _frame
from ._types import ArrayLike, Panel, RopeResult
from .errors import InvalidInputError, PhasorError

if TYPE_CHECKING:
    import pandas as pd

    from .client import EncoderClient

# Where Linux (glibc's shm_open) keeps POSIX shared-memory objects: the key
# "/phasor_x" is the file /dev/shm/phasor_x.
SHM_DIRECTORY = "/dev/shm"
DEFAULT_KEY_PREFIX = "/phasor"
# Tensors start on cache-line boundaries (and so on every element size's).
_ALIGNMENT_BYTES = 64
# The smallest region created: small calls then never regrow it.
_MIN_REGION_BYTES = 1 << 20

# The protocol's datatype names by numpy dtype (little-endian); BF16
# travels as uint16 bits and is asked for by name.
_DATATYPES = {np.dtype("<f4"): "FP32", np.dtype("<f2"): "FP16",
              np.dtype("<f8"): "FP64", np.dtype("<i8"): "INT64",
              np.dtype("<i4"): "INT32", np.dtype("|u1"): "UINT8",
              np.dtype("|b1"): "BOOL"}
_NUMPY_DTYPES = {name: dtype for dtype, name in _DATATYPES.items()}
_NUMPY_DTYPES["BF16"] = np.dtype("<u2")
# output_dtype names (as EncoderClient's) -> the `output_dtype` parameter.
_OUTPUT_DTYPES = {"float32": "FP32", "float16": "FP16", "bfloat16": "BF16",
                  "float64": "FP64", "fp32": "FP32", "fp16": "FP16",
                  "bf16": "BF16", "fp64": "FP64"}
# apply_rope's tensor layouts (EncoderClient.apply_rope's names, or the
# protocol's own) -> the `tensor_layout` parameter and the axis of T.
_TENSOR_LAYOUTS = {"thd": ("TOKENS_HEADS_DIM", 0),
                   "bthd": ("BATCH_SEQ_HEADS_DIM", 1),
                   "bhtd": ("BATCH_HEADS_SEQ_DIM", 2)}
_TENSOR_LAYOUTS.update({wire.lower(): (wire, axis)
                        for wire, axis in list(_TENSOR_LAYOUTS.values())})


def _aligned(offset: int) -> int:
    return -(-offset // _ALIGNMENT_BYTES) * _ALIGNMENT_BYTES


def _bytes_elements(items: Sequence[bytes]) -> np.ndarray:
    """BYTES elements as the protocol lays them out in raw form and in
    shared memory: each after its 4-byte little-endian length."""
    out = bytearray()
    for item in items:
        out += len(item).to_bytes(4, "little")
        out += item
    return np.frombuffer(bytes(out), dtype=np.uint8)


def _split_bytes_elements(raw: bytes) -> List[bytes]:
    items, at = [], 0
    while at + 4 <= len(raw):
        size = int.from_bytes(raw[at:at + 4], "little")
        items.append(bytes(raw[at + 4:at + 4 + size]))
        at += 4 + size
    return items


class _Input(NamedTuple):
    """One input tensor: wire name, datatype, shape and its bytes (a
    C-contiguous array of the wire's element type, or uint8 for BYTES)."""
    name: str
    datatype: str
    shape: Tuple[int, ...]
    array: np.ndarray


class _Region:
    """One POSIX shared-memory object of `byte_size` bytes, created
    exclusively and mapped read-write."""

    def __init__(self, key: str, byte_size: int) -> None:
        self.key = key
        self.name = key.lstrip("/")
        self.byte_size = byte_size
        self.path = os.path.join(SHM_DIRECTORY, self.name)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.ftruncate(fd, byte_size)
            self.map = mmap.mmap(fd, byte_size)
        except BaseException:
            os.close(fd)
            os.unlink(self.path)
            raise
        os.close(fd)
        # The mapping's address, to recognise arrays that lie in it.
        self.address = np.frombuffer(self.map, dtype=np.uint8).__array_interface__["data"][0]
        # Unlinks the object if the session is dropped without close().
        self._finalizer = weakref.finalize(self, _unlink, self.path)

    def offset_of(self, array: np.ndarray) -> Optional[int]:
        """The offset of `array`'s bytes in this mapping when they lie
        wholly inside it (and the array is C-contiguous), else None."""
        if not array.flags.c_contiguous:
            return None
        start = array.__array_interface__["data"][0] - self.address
        if start < 0 or start + array.nbytes > self.byte_size:
            return None
        return start

    def view(self, offset: int, dtype: np.dtype, count: int) -> np.ndarray:
        return np.frombuffer(self.map, dtype=dtype, count=count,
                             offset=offset)

    def release(self) -> None:
        """Unlinks the object and unmaps it unless a caller's view still
        holds the mapping (then the view's lifetime ends it)."""
        self._finalizer()
        try:
            self.map.close()
        except BufferError:  # Exported views: unmapped when they go.
            pass


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


class SharedMemorySession:
    """ApplyRope and panel encodings through shared memory; see the module
    docstring. Made by EncoderClient.shared_memory()."""

    def __init__(self, client: EncoderClient, *,
                 key_prefix: str = DEFAULT_KEY_PREFIX,
                 copy: bool = False) -> None:
        """A session on `client`'s channel, deadline and token.

        key_prefix: the start of the region's key; must match the server's
        --shared_memory_key_prefix ("/phasor" by default). copy: the
        default of every call's copy= (False: results are views of the
        region). No region exists until the first call.
        """
        if (not key_prefix.startswith("/") or "/" in key_prefix[1:]
                or len(key_prefix) < 2):
            raise InvalidInputError(
                "key_prefix", f"a POSIX shared-memory name: '/' then no "
                              f"further '/', got {key_prefix!r}")
        from ._proto.inference import grpc_service_pb2, grpc_service_pb2_grpc
        self._messages = grpc_service_pb2
        self._client = client
        self._stub = grpc_service_pb2_grpc.GRPCInferenceServiceStub(
            client._channel)
        self._key_stem = f"{key_prefix}_{os.getpid()}_{secrets.token_hex(4)}"
        self._generation = 0
        self._copy = copy
        self._lock = threading.Lock()
        self._region: Optional[_Region] = None
        # array()'s regions by name.
        self._arrays: Dict[str, _Region] = {}
        self._closed = False
        # Panel feature widths by configuration (see _panel_width).
        self._widths: Dict[Any, int] = {}

    # -- lifecycle -----------------------------------------------------------

    @property
    def region_key(self) -> Optional[str]:
        """The key of the region now registered ("/phasor_..."), or None
        before the first call and after close()."""
        region = self._region
        return region.key if region is not None else None

    @property
    def region_bytes(self) -> int:
        """The size of the region now registered (0 when there is none)."""
        region = self._region
        return region.byte_size if region is not None else 0

    def close(self) -> None:
        """Unregisters the region from the server and unlinks it. Results
        returned as views keep their bytes; no further calls."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._drop_region()
            finally:
                for name in list(self._arrays):
                    self._drop(self._arrays.pop(name))

    def __enter__(self) -> SharedMemorySession:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def status(self) -> Dict[str, Tuple[str, int, int]]:
        """The server's SystemSharedMemoryStatus: {name: (key, offset,
        byte_size)} of every region registered there (every client's)."""
        response = self._client._call(
            self._stub.SystemSharedMemoryStatus,
            self._messages.SystemSharedMemoryStatusRequest())
        return {name: (region.key, int(region.offset), int(region.byte_size))
                for name, region in response.regions.items()}

    def _drop_region(self) -> None:
        region, self._region = self._region, None
        if region is not None:
            self._drop(region)

    def _drop(self, region: _Region) -> None:
        """Unregisters `region` from the server and releases it."""
        try:
            self._client._call(
                self._stub.SystemSharedMemoryUnregister,
                self._messages.SystemSharedMemoryUnregisterRequest(
                    name=region.name))
        finally:
            region.release()

    def _reserve(self, byte_size: int) -> _Region:
        """The region, replaced by a larger one when `byte_size` does not
        fit."""
        if self._closed:
            raise ValueError("SharedMemorySession is closed")
        region = self._region
        if region is not None and region.byte_size >= byte_size:
            return region
        size = max(byte_size, _MIN_REGION_BYTES,
                   2 * region.byte_size if region is not None else 0)
        size = -(-size // mmap.PAGESIZE) * mmap.PAGESIZE
        self._drop_region()
        self._region = self._new_region(size)
        return self._region

    def _new_region(self, size: int) -> _Region:
        """A new region of `size` bytes (a whole number of pages),
        registered with the server."""
        key = f"{self._key_stem}_{self._generation}"
        self._generation += 1
        region = _Region(key, size)
        try:
            self._client._call(
                self._stub.SystemSharedMemoryRegister,
                self._messages.SystemSharedMemoryRegisterRequest(
                    name=region.name, key=region.key, offset=0,
                    byte_size=size))
        except PhasorError as error:
            region.release()
            raise PhasorError(
                error.code(),
                f"SystemSharedMemoryRegister of {region.key} ({size} bytes) "
                f"failed: {error.details()}{_register_hint(error.code())}",
                error.field_violations(), error.rpc_error) from None
        return region

    def array(self, name: str, shape: Sequence[int],
              dtype: Any = np.float32) -> np.ndarray:
        """A writable C-contiguous array of `shape` and `dtype` in shared
        memory, for inputs the server then reads in place (module
        docstring): pass it to a call as is. One region per `name`, reused
        while it is large enough; a larger request replaces it (arrays
        handed out before keep their old memory, no longer shared with the
        server). Contents are not initialised."""
        dtype = np.dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64))
        nbytes = max(count * dtype.itemsize, 1)
        with self._lock:
            if self._closed:
                raise ValueError("SharedMemorySession is closed")
            region = self._arrays.get(name)
            if region is None or region.byte_size < nbytes:
                if region is not None:
                    del self._arrays[name]
                    self._drop(region)
                size = -(-nbytes // mmap.PAGESIZE) * mmap.PAGESIZE
                region = self._new_region(size)
                self._arrays[name] = region
            return region.view(0, dtype, count).reshape(tuple(shape))

    def _placed(self, array: np.ndarray) -> Optional[Tuple[_Region, int]]:
        """The array() region and offset `array` lies in, or None."""
        for region in self._arrays.values():
            offset = region.offset_of(array)
            if offset is not None:
                return region, offset
        return None

    # -- one ModelInfer --------------------------------------------------------

    def _infer(self, model: str, inputs: Sequence[_Input],
               outputs: Sequence[Tuple[str, Optional[int]]],
               parameters: Mapping[str, Any], copy: bool
               ) -> Tuple[Dict[str, Tuple[np.ndarray, str, Any]], Any]:
        """ModelInfer of `model`: every input in the region, the outputs
        named with a byte size there too, those with None as raw contents.
        Returns ({name: (array, datatype, output message)}, response)."""
        # Inputs that lie in array() regions are read there; the others
        # are copied into the call's region.
        placed = [self._placed(tensor.array) if tensor.array.nbytes else None
                  for tensor in inputs]
        layout, at = [], 0
        for tensor, where in zip(inputs, placed):
            layout.append(at)
            if where is None:
                at = _aligned(at + tensor.array.nbytes)
        output_offsets = []
        for _, byte_size in outputs:
            output_offsets.append(at)
            if byte_size is not None:
                at = _aligned(at + byte_size)
        region = self._reserve(max(at, 1))

        request = self._messages.ModelInferRequest(model_name=model)
        for key, value in parameters.items():
            _set_parameter(request.parameters[key], value)
        for tensor, offset, where in zip(inputs, layout, placed):
            message = request.inputs.add(name=tensor.name,
                                         datatype=tensor.datatype,
                                         shape=list(tensor.shape))
            nbytes = tensor.array.nbytes
            if where is not None:
                _point_at(message.parameters, where[0].name, where[1], nbytes)
                continue
            if nbytes:
                destination = region.view(offset, np.uint8, nbytes)
                source = tensor.array.reshape(-1).view(np.uint8)
                if (destination.__array_interface__["data"][0]
                        != source.__array_interface__["data"][0]):
                    np.copyto(destination, source)
            _point_at(message.parameters, region.name, offset, nbytes)
        shared = {}
        for (name, byte_size), offset in zip(outputs, output_offsets):
            message = request.outputs.add(name=name)
            if byte_size is not None:
                _point_at(message.parameters, region.name, offset, byte_size)
                shared[name] = (offset, byte_size)

        response = self._client._call(self._stub.ModelInfer, request)
        results = {}
        raw = list(response.raw_output_contents)
        # Raw contents: one per output, or (outputs in shared memory
        # carrying none) one per output not in shared memory.
        aligned_raw = len(raw) == len(response.outputs)
        raw_index = 0
        for index, output in enumerate(response.outputs):
            dtype = _NUMPY_DTYPES.get(output.datatype)
            shape = tuple(int(d) for d in output.shape)
            if output.name in shared:
                offset, byte_size = shared[output.name]
                count = int(np.prod(shape, dtype=np.int64))
                if dtype is None or count * dtype.itemsize > byte_size:
                    raise PhasorError(
                        grpc.StatusCode.INTERNAL,
                        f"outputs[{output.name}]: the server answered "
                        f"{output.datatype} {list(shape)}, which does not "
                        f"fit the {byte_size} bytes asked for")
                array = region.view(offset, dtype, count).reshape(shape)
                if copy:
                    array = array.copy()
                else:
                    array.flags.writeable = False
            else:
                data = raw[index] if aligned_raw else raw[raw_index]
                raw_index += 1
                if output.datatype == "BYTES":
                    array = _split_bytes_elements(data)
                else:
                    array = np.frombuffer(data, dtype=dtype).reshape(shape)
            results[output.name] = (array, output.datatype, output)
        return results, response

    # -- ApplyRope -------------------------------------------------------------

    def apply_rope(self, query: ArrayLike, key: Optional[ArrayLike] = None,
                   positions: Optional[ArrayLike] = None, *, profile: str,
                   tensor_layout: Optional[str] = None,
                   dtype: Optional[str] = None,
                   copy: Optional[bool] = None) -> RopeResult:
        """EncoderClient.apply_rope through shared memory, for a rope
        profile (the model): RopeResult(query, key or None,
        attention_factor), equal byte for byte to
        client.apply_rope(query, key, positions, profile=profile,
        tensor_layout=...).

        query [T, H, D] ("thd", the default for 3 axes), [B, T, H, D]
        ("bthd") or [B, H, T, D] ("bhtd", HF's, the default for 4 axes),
        numpy float32 / float16 / float64, or uint16 bfloat16 bits with
        dtype="bfloat16"; key alike (its own head count). positions: None
        (0..T-1), [T] shared by the batch rows or [B, T]; integers are
        token indices (INT64), reals continuous time (FP64).
        copy: None takes the session's default; False returns read-only
        views of the region, valid until the next call or close().
        """
        query = np.asarray(query)
        layout = (tensor_layout or ("thd" if query.ndim == 3 else "bhtd"))
        if layout.lower() not in _TENSOR_LAYOUTS:
            raise InvalidInputError(
                "tensor_layout", f"shared memory takes {sorted(_TENSOR_LAYOUTS)}"
                                 f", got {tensor_layout!r}")
        wire_layout, seq_axis = _TENSOR_LAYOUTS[layout.lower()]
        expected_ndim = 3 if wire_layout == "TOKENS_HEADS_DIM" else 4
        inputs = [_rope_tensor("query", query, dtype, expected_ndim)]
        if key is not None:
            inputs.append(_rope_tensor("key", np.asarray(key), dtype,
                                       expected_ndim))
        tokens = query.shape[seq_axis]
        if positions is None:
            positions = np.arange(tokens, dtype=np.int64)
        positions = np.asarray(positions)
        if positions.ndim == 2 and positions.shape[0] == 1:
            positions = positions[0]
        if positions.dtype.kind in "iub":
            positions = np.ascontiguousarray(positions, dtype="<i8")
        elif positions.dtype.kind == "f":
            positions = np.ascontiguousarray(positions, dtype="<f8")
        else:
            raise InvalidInputError(
                "positions", f"integers or reals, got {positions.dtype}")
        inputs.append(_Input("positions", _DATATYPES[positions.dtype],
                             positions.shape, positions))
        outputs = [(tensor.name, tensor.array.nbytes) for tensor in inputs
                   if tensor.name != "positions"]
        parameters = ({"tensor_layout": wire_layout}
                      if wire_layout != "TOKENS_HEADS_DIM" else {})
        with self._lock:
            results, response = self._infer(
                profile, inputs, outputs, parameters,
                self._copy if copy is None else copy)
        factor = response.parameters.get("attention_factor")
        return RopeResult(results["query"][0],
                          results["key"][0] if key is not None else None,
                          factor.double_param if factor is not None else 1.0)

    # -- panels ----------------------------------------------------------------

    def encode_panel(
            self, timestamps: Optional[ArrayLike] = None,
            values: Optional[ArrayLike] = None,
            mask: Optional[ArrayLike] = None, *, profile: str,
            series_offsets: Optional[ArrayLike] = None,
            series_ids: Optional[ArrayLike] = None,
            time_zones: Optional[Sequence[str]] = None,
            time_zone_index: Optional[ArrayLike] = None,
            states: Optional[Sequence[Any]] = None,
            output_dtype: str = "float32",
            content: Optional[ArrayLike] = None,
            channel_names: Optional[Sequence[str]] = None,
            event_times: Optional[ArrayLike] = None,
            event_channels: Optional[ArrayLike] = None,
            event_values: Optional[ArrayLike] = None,
            num_channels: int = 0, time_unit: Optional[str] = None,
            spec: Any = None, return_states: bool = False,
            copy: Optional[bool] = None) -> Panel:
        """EncoderClient.encode_panel through shared memory, for a temporal
        profile (the model): Panel(features [rows, F], schema, states,
        series_offsets), the features equal byte for byte to
        client.encode_panel(..., profile=profile).

        Arguments as encode_panel's (wide timestamps/values/mask or long
        event_*; series_offsets or series_ids; time_zones with
        time_zone_index; states to continue the series), in one ModelInfer
        (a panel is never cut: shared memory has no message limit; the
        server's --max_elements_per_request still applies).
        return_states: also return each series' state (they travel as raw
        BYTES in the reply, their size being unknown in advance); without
        it `states` is []. spec must be None: the profile is the spec.
        copy: None takes the session's default; False returns features as
        a read-only view of the region, valid until the next call or
        close().
        """
        if spec is not None:
            raise InvalidInputError(
                "spec", "shared-memory calls run a profile's spec (the "
                        "model); give profile= only")
        if not profile:
            raise InvalidInputError("profile", "the model to run: a "
                                               "temporal profile's name")
        dtype_name = str(np.dtype(output_dtype).name
                         if not isinstance(output_dtype, str)
                         else output_dtype).lower()
        if dtype_name not in _OUTPUT_DTYPES:
            raise InvalidInputError(
                "output_dtype", f"one of float32, float16, bfloat16, "
                                f"float64, got {output_dtype!r}")
        _, row_tensors, rows, offsets, _ = _panel_calls.panel_rows(
            timestamps, values, mask, content, event_times, event_channels,
            event_values, series_offsets, series_ids, time_unit,
            output_dtype)
        num_series = len(offsets) - 1
        inputs = [_row_input(t) for t in row_tensors]
        inputs.append(_Input("series_offsets", "INT64", offsets.shape,
                             np.ascontiguousarray(offsets, dtype="<i8")))
        if channel_names:
            names = [str(n).encode() for n in channel_names]
            inputs.append(_Input("channel_names", "BYTES", (len(names),),
                                 _bytes_elements(names)))
        parameters: Dict[str, Any] = {}
        if _OUTPUT_DTYPES[dtype_name] != "FP32":
            parameters["output_dtype"] = _OUTPUT_DTYPES[dtype_name]
        if num_channels:
            parameters["num_channels"] = int(num_channels)
        zones: List[_Input] = []
        if time_zones:
            time_zones = ([time_zones] if isinstance(time_zones, str)
                          else list(time_zones))
            try:
                index = _panel.resolve_time_zone_index(
                    time_zones, time_zone_index, num_series)
            except ValueError as error:
                raise InvalidInputError("time_zones", str(error)) from None
            zones = [
                _Input("time_zones", "BYTES", (len(time_zones),),
                       _bytes_elements([z.encode() for z in time_zones])),
                _Input("time_zone_index", "INT32", (num_series,),
                       np.ascontiguousarray(index, dtype="<i4"))]
        state_inputs: List[_Input] = []
        if states is not None:
            serialized = [state.SerializeToString() if state is not None
                          else b"" for state in states]
            state_inputs = [_Input("states", "BYTES", (len(serialized),),
                                   _bytes_elements(serialized))]

        with self._lock:
            copy = self._copy if copy is None else copy
            width = self._panel_width(profile, inputs, parameters)
            itemsize = 8 if _OUTPUT_DTYPES[dtype_name] == "FP64" else (
                4 if _OUTPUT_DTYPES[dtype_name] == "FP32" else 2)
            outputs: List[Tuple[str, Optional[int]]] = [
                ("features", rows * width * itemsize)]
            if return_states:
                outputs.append(("states", None))
            results, _ = self._infer(profile, inputs + zones + state_inputs,
                                     outputs, parameters, copy)
        features, datatype, message = results["features"]
        if datatype == "BF16":  # As the native client returns bfloat16.
            features = _bfloat16_as_float32(features)
        schema = _schema(message)
        panel_states: List[Any] = []
        if return_states:
            from ._stubs import encoder_pb2
            panel_states = [encoder_pb2.SeriesState.FromString(item)
                            for item in results["states"][0]]
        return Panel(features, schema, panel_states, offsets)

    def encode_frame(self, df: pd.DataFrame, *, profile: str,
                     series_column: Any = None, time_column: Any = None,
                     value_columns: Any = None, channel_column: Any = None,
                     channels: Optional[Sequence[Any]] = None,
                     time_zones: Any = None,
                     states: Optional[Mapping[Any, Any]] = None,
                     time_unit: Optional[str] = None,
                     output_dtype: str = "float32",
                     return_states: bool = False) -> _frame.FrameResult:
        """EncoderClient.encode_frame through shared memory (one
        encode_panel of this session): FrameResult(frame, states, schema,
        channels) with the same frame as the native call for the same
        profile. The frame owns its data (it is built from the features,
        not a view). states is {} unless return_states.
        """
        return _frame.encode_frame(
            _FrameAdapter(self, return_states), df,
            series_column=series_column, time_column=time_column,
            value_columns=value_columns, channel_column=channel_column,
            channels=channels, time_zones=time_zones, states=states,
            spec=None, profile=profile, time_unit=time_unit,
            output_dtype=output_dtype, blocks={})

    def _panel_width(self, profile: str, inputs: Sequence[_Input],
                     parameters: Mapping[str, Any]) -> int:
        """F for this configuration: remembered, else from one call with
        one empty series (its features [0, F] come back raw)."""
        key = (profile, tuple((t.name, t.datatype, t.shape[1:])
                              for t in inputs if t.name != "series_offsets"),
               tuple(sorted(parameters.items())))
        width = self._widths.get(key)
        if width is not None:
            return width
        probe = []
        for tensor in inputs:
            if tensor.name == "series_offsets":
                probe.append(_Input("series_offsets", "INT64", (2,),
                                    np.zeros(2, dtype="<i8")))
            elif tensor.name == "channel_names":
                probe.append(tensor)
            else:
                shape = (0,) + tuple(tensor.shape[1:])
                probe.append(_Input(tensor.name, tensor.datatype, shape,
                                    tensor.array[:0]))
        results, _ = self._infer(profile, probe, [("features", None)],
                                 parameters, copy=True)
        features = results["features"][0]
        width = int(features.shape[1]) if features.ndim == 2 else 0
        self._widths[key] = width
        return width


class _FrameAdapter:
    """What frame.encode_frame calls on its client: encode_panel, here the
    session's."""

    def __init__(self, session: SharedMemorySession, return_states: bool):
        self._session = session
        self._return_states = return_states

    def encode_panel(self, **kwargs: Any) -> Panel:
        kwargs.pop("spec", None)  # None: frame.encode_frame with a profile.
        return self._session.encode_panel(
            return_states=self._return_states, copy=False, **kwargs)


def _register_hint(code: grpc.StatusCode) -> str:
    """What a refused registration most likely means, for its message."""
    if code == grpc.StatusCode.UNIMPLEMENTED:
        return (" (the server has system shared memory disabled: start "
                "phasor-server with --system_shared_memory=true)")
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED,
                grpc.StatusCode.DEADLINE_EXCEEDED):
        return ""
    return (" (shared memory needs the server on this host, and the "
            "session's key_prefix equal to the server's "
            "--shared_memory_key_prefix)")


def _set_parameter(parameter: Any, value: Any) -> None:
    if isinstance(value, bool):
        parameter.bool_param = value
    elif isinstance(value, int):
        parameter.int64_param = value
    elif isinstance(value, float):
        parameter.double_param = value
    else:
        parameter.string_param = str(value)


def _point_at(parameters: Any, region: str, offset: int,
              byte_size: int) -> None:
    """The extension's three parameters on an input or requested output."""
    parameters["shared_memory_region"].string_param = region
    parameters["shared_memory_offset"].int64_param = offset
    parameters["shared_memory_byte_size"].int64_param = byte_size


def _rope_tensor(name: str, array: np.ndarray, dtype: Optional[str],
                 ndim: int) -> _Input:
    if array.ndim != ndim:
        raise InvalidInputError(
            name, f"expected {ndim} axes for this tensor_layout, got shape "
                  f"{array.shape}")
    if dtype is not None and str(dtype).lower() in ("bfloat16", "bf16"):
        if array.dtype != np.uint16:
            raise InvalidInputError(
                name, f"dtype='bfloat16' takes uint16 bfloat16 bits, got "
                      f"{array.dtype}")
        return _Input(name, "BF16", array.shape,
                      np.ascontiguousarray(array, dtype="<u2"))
    wire = array.dtype.newbyteorder("<") if array.dtype.byteorder == ">" \
        else array.dtype
    datatype = _DATATYPES.get(np.dtype(wire))
    if datatype not in ("FP32", "FP16", "FP64") or (
            dtype is not None and np.dtype(dtype) != np.dtype(wire)):
        raise InvalidInputError(
            name, f"shared memory sends float32, float16, float64 or "
                  f"uint16 with dtype='bfloat16' as they are, got "
                  f"{array.dtype}" + (f" with dtype={dtype!r}" if dtype
                                      else ""))
    return _Input(name, datatype, array.shape,
                  np.ascontiguousarray(array, dtype=wire))


def _row_input(tensor: Any) -> _Input:
    """A panel row tensor (_panel.RowTensor) as the protocol's input of the
    same name, in its wire dtype."""
    dtype = np.dtype(tensor.dtype).newbyteorder("<") \
        if np.dtype(tensor.dtype).itemsize > 1 else np.dtype(tensor.dtype)
    array = np.ascontiguousarray(tensor.array, dtype=dtype)
    return _Input(tensor.field, _DATATYPES[dtype], array.shape, array)


def _schema(output: Any) -> List[Any]:
    """The features output's `schema` parameter (JSON) as SchemaEntry
    messages, as the native reply carries them."""
    from ._stubs import encoder_pb2
    parameter = output.parameters.get("schema")
    if parameter is None or not parameter.string_param:
        return []
    return [encoder_pb2.SchemaEntry(block=entry.get("block", ""),
                                    offset=int(entry.get("offset", 0)),
                                    width=int(entry.get("width", 0)),
                                    meaning=entry.get("meaning", ""))
            for entry in json.loads(parameter.string_param)]


def _bfloat16_as_float32(bits: np.ndarray) -> np.ndarray:
    """uint16 bfloat16 bits widened exactly to float32."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


__all__ = ["DEFAULT_KEY_PREFIX", "SHM_DIRECTORY", "SharedMemorySession"]
