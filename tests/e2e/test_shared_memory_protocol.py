"""Triton's system shared-memory extension on the Open Inference Protocol,
driven through the raw inference stubs (not phasor_client's session)
against real phasor-server processes started with
--system_shared_memory=true.

The test creates its POSIX shared-memory objects itself, as files under
/dev/shm named phasor_<pid>_... (the server's default key prefix is
"/phasor"), and removes them when each test ends.

Checked:
 - inputs and outputs through one region (inputs, then outputs, at offsets
   in a region that itself starts inside its object) and through two
   regions, mixed with raw inputs and a raw output: results byte for byte
   those of the native phasor.v1.Encoder RPC; the reply carries an empty
   raw_output_contents entry for each output in shared memory and its
   parameters name the region, the offset and the bytes written;
 - ModelInfer errors name the parameter (offset or byte_size outside the
   region, byte_size other than the tensor's, unknown or unregistered
   region, a raw_input_contents count that ignores the region, an output
   in a region that the call does not produce);
 - Register errors (key outside the prefix, not one shm name, a symlink or
   a directory instead of an object, no such object, region past the
   object's end, duplicate name), Status of all and of one, Unregister of an
   unknown name and of all;
 - an object truncated or removed after Register fails the next call with
   FAILED_PRECONDITION naming the region, and the server keeps serving;
 - calls through a region while it is unregistered and registered again
   answer the native result or INVALID_ARGUMENT naming the region;
 - the bounds on regions and bytes (RESOURCE_EXHAUSTED naming the flag), a
   custom key prefix, and a clean exit with regions still registered;
 - outputs written into a region are not charged to the memory budget: a
   call with tensors larger than the budget is refused in the messages and
   answered with inputs and outputs in a region;
 - Unregister unmaps: the object's mapping leaves /proc/<pid>/maps and the
   server's resident shared memory (RssShmem) drops by what the call
   touched;
 - gRPC on a Unix-domain socket (--grpc_address=unix:PATH): ModelInfer,
   through shared memory too, and the native EncodePositions; tensors in
   regions past --max_message_bytes, which bounds only the messages;
 - ServerMetadata lists "system_shared_memory" when it is on; with a bearer
   token the shared-memory RPCs need it.
"""

import itertools
import mmap
import os
import shutil
import stat
import tempfile
import threading
import time
import unittest

import grpc
import numpy as np

import harness
from phasor_client import _stubs
from phasor_client._proto.inference import (grpc_service_pb2,
                                            grpc_service_pb2_grpc)

pb = _stubs.encoder_pb2
ipb = grpc_service_pb2
TIMEOUT_S = harness.CLIENT_TIMEOUT_S
NS = 1_000_000_000
START_NS = 1_772_949_600 * NS  # 2026-03-08 06:00 UTC
SHM_DIRECTORY = "/dev/shm"
MIB = 1 << 20

PROFILES = """
profile { name: "sin" spec { positional { sinusoidal { dim: 8 } } } }
profile { name: "rope" spec { rope { rotary_dim: 16 } } }
profile {
  name: "vitals"
  spec {
    temporal {
      content {}
      time { dim: 4 min_period_seconds: 60 max_period_seconds: 86400 }
      gaps {}
      calendar { time_zone: "Europe/Paris" fields: HOUR_OF_DAY }
    }
  }
}
"""

REGION = "shared_memory_region"
OFFSET = "shared_memory_offset"
BYTE_SIZE = "shared_memory_byte_size"

_serial = itertools.count()


class ShmObject:
    """A POSIX shared-memory object of `size` bytes made by this test:
    /dev/shm/phasor_<pid>_<tag>_<n>, mapped read-write here. close()
    unmaps and unlinks it."""

    def __init__(self, size, tag="obj"):
        self.name = f"phasor_{os.getpid()}_{tag}_{next(_serial)}"
        self.key = "/" + self.name
        self.path = os.path.join(SHM_DIRECTORY, self.name)
        self.size = size
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.ftruncate(fd, size)
            self.map = mmap.mmap(fd, size)
        except BaseException:
            os.close(fd)
            os.unlink(self.path)
            raise
        os.close(fd)

    def write(self, offset, data):
        data = bytes(data)
        self.map[offset:offset + len(data)] = data

    def read(self, offset, count):
        return bytes(self.map[offset:offset + count])

    def truncate(self, size):
        """Resizes the object (its owner's right). This process's own mapping
        is dropped first: touching pages past the new end would fault here."""
        self.unmap()
        os.truncate(self.path, size)

    def unmap(self):
        if self.map is not None:
            self.map.close()
            self.map = None

    def close(self):
        self.unmap()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


violation = harness.violation
tensor = harness.native_tensor


def values(shape, scale=1.0):
    count = int(np.prod(shape))
    return (np.sin(np.arange(count) * 0.37) * scale).astype("<f4").reshape(shape)


def point_at(parameters, region, offset, byte_size):
    parameters[REGION].string_param = region
    parameters[OFFSET].int64_param = offset
    parameters[BYTE_SIZE].int64_param = byte_size


def infer_request(model, inputs, outputs=()):
    """A ModelInferRequest. inputs: (name, datatype, shape, where), where is
    the raw bytes or (region, offset, byte_size); outputs: (name, where),
    where is None (raw) or (region, offset, byte_size)."""
    request = ipb.ModelInferRequest(model_name=model)
    for name, datatype, shape, where in inputs:
        message = request.inputs.add(name=name, datatype=datatype,
                                     shape=list(shape))
        if isinstance(where, tuple):
            point_at(message.parameters, *where)
        else:
            request.raw_input_contents.append(bytes(where))
    for name, where in outputs:
        message = request.outputs.add(name=name)
        if where is not None:
            point_at(message.parameters, *where)
    return request


def bytes_elements(raw):
    """Raw BYTES contents: each element after its 4-byte little-endian
    length."""
    out, at = [], 0
    while at < len(raw):
        length = int.from_bytes(raw[at:at + 4], "little")
        out.append(raw[at + 4:at + 4 + length])
        at += 4 + length
    return out


def mapped_paths(pid):
    """The files mapped by process `pid` (/proc/<pid>/maps' path column,
    without a " (deleted)" mark)."""
    paths = set()
    with open(f"/proc/{pid}/maps") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            if len(fields) == 6:
                paths.add(fields[5].strip().removesuffix(" (deleted)"))
    return paths


def resident_shared_bytes(pid):
    """RssShmem of /proc/<pid>/status: resident pages of shared memory
    (tmpfs mappings such as /dev/shm objects) the process has touched."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("RssShmem:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"/proc/{pid}/status has no RssShmem")


class Rope:
    """An ApplyRope case of the "rope" profile: query [T, 4, 32] and key
    [T, 2, 32] FP32, positions [T] INT64, and the native reply."""

    def __init__(self, native_stub, tokens=6):
        self.query = values((tokens, 4, 32))
        self.key = values((tokens, 2, 32), 0.5)
        self.positions = np.array([0, 1, 2, 100, 1 << 33, 7, 8, 9][:tokens],
                                  dtype="<i8")
        self.native = native_stub.ApplyRope(pb.ApplyRopeRequest(
            profile="rope", query=tensor(self.query, pb.FLOAT32),
            key=tensor(self.key, pb.FLOAT32),
            positions=pb.Positions(values=tensor(self.positions, pb.INT64))),
            timeout=TIMEOUT_S)

    def inputs(self, query_at=None, key_at=None, positions_at=None):
        """The three inputs, each raw or at (region, offset, byte_size)."""
        return [("query", "FP32", self.query.shape, query_at or self.query.tobytes()),
                ("key", "FP32", self.key.shape, key_at or self.key.tobytes()),
                ("positions", "INT64", self.positions.shape,
                 positions_at or self.positions.tobytes())]


class ProtocolTestCase(unittest.TestCase):
    """Helpers shared by the test classes: channels, objects, assertions."""

    def make_object(self, size, tag="obj"):
        made = ShmObject(size, tag)
        self.addCleanup(made.close)
        return made

    def assert_rpc_error(self, code, call, *fragments, field=None):
        """Runs `call`, which must fail with `code`; the message holds each
        of `fragments` and, when given, the BadRequest field is `field`."""
        with self.assertRaises(grpc.RpcError) as caught:
            call()
        error = caught.exception
        self.assertEqual(error.code(), code, error.details())
        for fragment in fragments:
            self.assertIn(fragment, error.details())
        if field is not None:
            self.assertIn(field, error.details())
            self.assertEqual(violation(error), field, error.details())
        return error

    def scratch_profiles(self, prefix):
        """A temporary directory (removed when the test ends) holding
        PROFILES as profiles.txtpb: (directory, profiles path)."""
        tmp = tempfile.mkdtemp(prefix=prefix)
        self.addCleanup(shutil.rmtree, tmp, True)
        profiles = os.path.join(tmp, "profiles.txtpb")
        with open(profiles, "w") as f:
            f.write(PROFILES)
        return tmp, profiles

    @staticmethod
    def connect(target):
        channel = grpc.insecure_channel(target)
        return (channel, grpc_service_pb2_grpc.GRPCInferenceServiceStub(channel),
                _stubs.encoder_pb2_grpc.EncoderStub(channel))


class SharedMemoryProtocolTest(ProtocolTestCase):

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="phasor-shm-protocol-")
        cls.profiles = os.path.join(cls.tmp, "profiles.txtpb")
        with open(cls.profiles, "w") as f:
            f.write(PROFILES)
        cls.server = harness.Server([f"--profiles={cls.profiles}",
                                     "--system_shared_memory=true"]).start()
        cls.channel, cls.oip, cls.native = cls.connect(cls.server.target)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        try:
            cls.server.stop()
        finally:
            cls.server.kill()
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def tearDown(self):
        # Each test starts from no regions (cleanups then unlink objects).
        self.oip.SystemSharedMemoryUnregister(
            ipb.SystemSharedMemoryUnregisterRequest(name=""), timeout=TIMEOUT_S)

    def register(self, name, key, offset, byte_size):
        self.oip.SystemSharedMemoryRegister(
            ipb.SystemSharedMemoryRegisterRequest(
                name=name, key=key, offset=offset, byte_size=byte_size),
            timeout=TIMEOUT_S)

    def unregister(self, name):
        self.oip.SystemSharedMemoryUnregister(
            ipb.SystemSharedMemoryUnregisterRequest(name=name), timeout=TIMEOUT_S)

    def status(self, name=""):
        """[(name, key, offset, byte_size)] of the Status reply, sorted; its
        map is keyed by the region's name."""
        regions = self.oip.SystemSharedMemoryStatus(
            ipb.SystemSharedMemoryStatusRequest(name=name), timeout=TIMEOUT_S).regions
        for map_key, region in regions.items():
            self.assertEqual(map_key, region.name)
        return sorted((r.name, r.key, r.offset, r.byte_size) for r in regions.values())

    def infer(self, request):
        return self.oip.ModelInfer(request, timeout=TIMEOUT_S)

    def assert_alive_and_serving(self, rope):
        """A call without shared memory still answers, byte for byte the
        native result, and the process has not died."""
        self.assertIsNone(self.server.process.poll(), self.server.log())
        response = self.infer(infer_request("rope", rope.inputs()))
        self.assertEqual(response.raw_output_contents[0], rope.native.query.data)

    # -- results -----------------------------------------------------------

    def test_server_metadata_lists_the_extension(self):
        metadata = self.oip.ServerMetadata(ipb.ServerMetadataRequest(),
                                           timeout=TIMEOUT_S)
        self.assertIn("system_shared_memory", metadata.extensions)
        self.assertIn("parameters", metadata.extensions)
        self.assertNotIn("cuda_shared_memory", metadata.extensions)

    def test_inputs_then_outputs_in_one_region(self):
        rope = Rope(self.native)
        q_bytes, k_bytes = rope.query.nbytes, rope.key.nbytes
        p_bytes = rope.positions.nbytes
        # The region starts 4096 bytes into its object; the offsets below
        # are relative to the region.
        shm = self.make_object(64 * 1024)
        base = 4096
        self.register("one", shm.key, base, 32 * 1024)
        at_query, at_key, at_positions = 0, 3072, 4608
        out_query, out_key = 8192, 12288
        shm.write(base + at_query, rope.query.tobytes())
        shm.write(base + at_key, rope.key.tobytes())
        shm.write(base + at_positions, rope.positions.tobytes())
        # The key's output gets more room than it needs: the reply says
        # how many bytes were written.
        request = infer_request(
            "rope",
            rope.inputs(("one", at_query, q_bytes), ("one", at_key, k_bytes),
                        ("one", at_positions, p_bytes)),
            [("query", ("one", out_query, q_bytes)),
             ("key", ("one", out_key, k_bytes + 512))])
        self.assertEqual(len(request.raw_input_contents), 0)
        response = self.infer(request)

        self.assertEqual(shm.read(base + out_query, q_bytes), rope.native.query.data)
        self.assertEqual(shm.read(base + out_key, k_bytes), rope.native.key.data)
        # The inputs are read, not written.
        self.assertEqual(shm.read(base + at_query, q_bytes), rope.query.tobytes())
        self.assertEqual(response.parameters["attention_factor"].double_param,
                         rope.native.attention_factor)
        self.assertEqual([o.name for o in response.outputs], ["query", "key"])
        self.assertEqual(list(response.raw_output_contents), [b"", b""])
        expected = {"query": ([6, 4, 32], out_query, q_bytes),
                    "key": ([6, 2, 32], out_key, k_bytes)}
        for output in response.outputs:
            shape, offset, byte_size = expected[output.name]
            self.assertEqual((output.datatype, list(output.shape)), ("FP32", shape))
            self.assertEqual(output.parameters[REGION].string_param, "one")
            self.assertEqual(output.parameters[OFFSET].int64_param, offset)
            self.assertEqual(output.parameters[BYTE_SIZE].int64_param, byte_size)

        # Again with new inputs in the same places: the region is reused.
        rope2 = Rope(self.native, tokens=5)
        shm.write(base + at_query, rope2.query.tobytes())
        shm.write(base + at_key, rope2.key.tobytes())
        shm.write(base + at_positions, rope2.positions.tobytes())
        self.infer(infer_request(
            "rope",
            rope2.inputs(("one", at_query, rope2.query.nbytes),
                         ("one", at_key, rope2.key.nbytes),
                         ("one", at_positions, rope2.positions.nbytes)),
            [("query", ("one", out_query, q_bytes))]))
        self.assertEqual(shm.read(base + out_query, rope2.query.nbytes),
                         rope2.native.query.data)

    def test_inputs_and_outputs_in_two_regions(self):
        rows, channels = 12, 2
        steps = np.array([0, 60, 61, 3600, 5, 7200, 1, 1, 900, 86400, 30, 17])
        times = (START_NS + np.cumsum(steps) * NS).astype("<i8")
        series = values((rows, channels))
        series[1, 0] = np.nan
        series[4, 1] = np.nan
        names = [b"hr", b"spo2"]
        native = self.native.EncodeObservations(pb.EncodeObservationsRequest(
            profile="vitals", observations=pb.Observations(
                timestamps=tensor(times, pb.INT64), values=tensor(series, pb.FLOAT32),
                channel_names=[n.decode() for n in names])), timeout=TIMEOUT_S)
        feature_bytes = len(native.features.data)
        self.assertGreater(feature_bytes, 0)

        inputs_object = self.make_object(8192, "in")
        outputs_object = self.make_object(feature_bytes + 8192, "out")
        self.register("in", inputs_object.key, 0, 8192)
        self.register("out", outputs_object.key, 0, feature_bytes + 8192)
        inputs_object.write(0, times.tobytes())
        inputs_object.write(1024, series.tobytes())
        # channel_names travels raw, between two inputs in shared memory:
        # raw_input_contents lists only the inputs not in shared memory.
        raw_names = b"".join(len(n).to_bytes(4, "little") + n for n in names)
        request = infer_request(
            "vitals",
            [("timestamps", "INT64", times.shape, ("in", 0, times.nbytes)),
             ("channel_names", "BYTES", [2], raw_names),
             ("values", "FP32", series.shape, ("in", 1024, series.nbytes))],
            [("features", ("out", 4096, feature_bytes + 4096)), ("state", None)])
        response = self.infer(request)

        self.assertEqual(outputs_object.read(4096, feature_bytes), native.features.data)
        self.assertEqual([o.name for o in response.outputs], ["features", "state"])
        features, state = response.outputs
        self.assertEqual((features.datatype, list(features.shape)),
                         ("FP32", list(native.features.shape)))
        self.assertEqual(features.parameters[REGION].string_param, "out")
        self.assertEqual(features.parameters[OFFSET].int64_param, 4096)
        self.assertEqual(features.parameters[BYTE_SIZE].int64_param, feature_bytes)
        self.assertNotIn(REGION, state.parameters)
        self.assertEqual(response.raw_output_contents[0], b"")
        (state_bytes,) = bytes_elements(response.raw_output_contents[1])
        self.assertEqual(pb.SeriesState.FromString(state_bytes), native.state)

    def test_unaligned_in_place_sixteen_bit_and_bytes_outputs(self):
        """Outputs the kernel cannot write in place (a 16-bit type, an
        unaligned offset, BYTES) are copied into the region; an output over
        its own input is the rotation in place."""
        shm = self.make_object(65536, "odd")
        # The region starts 1000 bytes into its object (not page-aligned).
        base = 1000
        self.register("odd", shm.key, base, 60000)
        rope = Rope(self.native)
        query16, key16 = rope.query.astype("<f2"), rope.key.astype("<f2")
        native16 = self.native.ApplyRope(pb.ApplyRopeRequest(
            profile="rope", query=tensor(query16, pb.FLOAT16), key=tensor(key16, pb.FLOAT16),
            positions=pb.Positions(values=tensor(rope.positions, pb.INT64))),
            timeout=TIMEOUT_S)
        shm.write(base + 3, query16.tobytes())
        shm.write(base + 4003, rope.positions.tobytes())
        response = self.infer(infer_request(
            "rope",
            [("query", "FP16", query16.shape, ("odd", 3, query16.nbytes)),
             ("key", "FP16", key16.shape, key16.tobytes()),
             ("positions", "INT64", rope.positions.shape, ("odd", 4003, rope.positions.nbytes))],
            [("query", ("odd", 3, query16.nbytes)), ("key", ("odd", 8005, key16.nbytes))]))
        self.assertEqual(list(response.raw_output_contents), [b"", b""])
        self.assertEqual(shm.read(base + 3, query16.nbytes), native16.query.data)
        self.assertEqual(shm.read(base + 8005, key16.nbytes), native16.key.data)
        self.assertEqual([o.datatype for o in response.outputs], ["FP16", "FP16"])

        # FP32 at an odd offset, in place over its input.
        shm.write(base + 12001, rope.query.tobytes())
        self.infer(infer_request(
            "rope", rope.inputs(query_at=("odd", 12001, rope.query.nbytes)),
            [("query", ("odd", 12001, rope.query.nbytes))]))
        self.assertEqual(shm.read(base + 12001, rope.query.nbytes), rope.native.query.data)

        # A BYTES output (the series state) in the region: its length-
        # prefixed element, byte_size the bytes written.
        times = (START_NS + np.arange(4, dtype="<i8") * 600 * NS).astype("<i8")
        series = values((4, 2))
        native = self.native.EncodeObservations(pb.EncodeObservationsRequest(
            profile="vitals", observations=pb.Observations(
                timestamps=tensor(times, pb.INT64), values=tensor(series, pb.FLOAT32))),
            timeout=TIMEOUT_S)
        response = self.infer(infer_request(
            "vitals", [("timestamps", "INT64", times.shape, times.tobytes()),
                       ("values", "FP32", series.shape, series.tobytes())],
            [("features", None), ("state", ("odd", 20000, 4096))]))
        features, state = response.outputs
        self.assertEqual(response.raw_output_contents[0], native.features.data)
        self.assertEqual(response.raw_output_contents[1], b"")
        written = state.parameters[BYTE_SIZE].int64_param
        self.assertGreater(written, 4)
        self.assertLess(written, 4096)
        (state_bytes,) = bytes_elements(shm.read(base + 20000, written))
        self.assertEqual(pb.SeriesState.FromString(state_bytes), native.state)

    # -- ModelInfer errors -------------------------------------------------

    def test_model_infer_errors_name_the_parameter(self):
        rope = Rope(self.native)
        q_bytes = rope.query.nbytes
        shm = self.make_object(16384, "err")
        self.register("err", shm.key, 0, 16384)
        shm.write(0, rope.query.tobytes())
        invalid = grpc.StatusCode.INVALID_ARGUMENT

        def query_at(where, outputs=()):
            return lambda: self.infer(infer_request(
                "rope", rope.inputs(query_at=where), outputs))

        cases = [
            ("offset past the end", query_at(("err", 20000, q_bytes)),
             f"inputs[query].parameters[{OFFSET}]", "20000 is outside region 'err'"),
            ("negative offset", query_at(("err", -8, q_bytes)),
             f"inputs[query].parameters[{OFFSET}]", "-8 is outside"),
            ("byte_size past the end", query_at(("err", 16384 - 1024, q_bytes)),
             f"inputs[query].parameters[{BYTE_SIZE}]", "reach past the end of region 'err'"),
            ("byte_size not the tensor's", query_at(("err", 0, q_bytes - 4)),
             f"inputs[query].parameters[{BYTE_SIZE}]", f"needs {q_bytes}"),
            ("unknown region", query_at(("nope", 0, q_bytes)),
             f"inputs[query].parameters[{REGION}]", "no shared-memory region 'nope'"),
            ("output offset past the end",
             query_at(("err", 0, q_bytes), [("query", ("err", 16400, q_bytes))]),
             f"outputs[query].parameters[{OFFSET}]", "outside region 'err'"),
            ("output too small",
             query_at(("err", 0, q_bytes), [("query", ("err", 4096, q_bytes - 64))]),
             f"outputs[query].parameters[{BYTE_SIZE}]", str(q_bytes)),
            ("output byte_size negative",
             query_at(("err", 0, q_bytes), [("query", ("err", 4096, -1))]),
             f"outputs[query].parameters[{BYTE_SIZE}]", "must be >= 0, got -1"),
            # No key input, so no key output: refused in a region as in raw.
            ("output not produced",
             lambda: self.infer(infer_request(
                 "rope", [rope.inputs(query_at=("err", 0, q_bytes))[0], rope.inputs()[2]],
                 [("query", ("err", 4096, q_bytes)), ("key", ("err", 8192, 4096))])),
             "outputs[key]", "is not produced for these inputs"),
        ]
        for label, call, field, fragment in cases:
            with self.subTest(label):
                self.assert_rpc_error(invalid, call, fragment, field=field)

        # Typed contents next to a region, an offset without a region, and a
        # raw entry left for the input that is in shared memory.
        request = infer_request("rope", rope.inputs(query_at=("err", 0, q_bytes)))
        request.inputs[0].contents.fp32_contents.extend(rope.query.ravel().tolist())
        self.assert_rpc_error(invalid, lambda: self.infer(request),
                              "must be empty for an input in shared memory",
                              field="inputs[query].contents")
        request = infer_request("rope", rope.inputs())
        request.inputs[0].parameters[OFFSET].int64_param = 0
        self.assert_rpc_error(invalid, lambda: self.infer(request),
                              "only meaningful with shared_memory_region",
                              field=f"inputs[query].parameters[{OFFSET}]")
        request = infer_request("rope", rope.inputs(query_at=("err", 0, q_bytes)))
        request.raw_input_contents.insert(0, rope.query.tobytes())
        self.assert_rpc_error(invalid, lambda: self.infer(request),
                              "holds 3 entries", field="raw_input_contents")

        # The same request works while "err" is registered, not after.
        good = query_at(("err", 0, q_bytes), [("query", ("err", 8192, q_bytes))])
        good()
        self.assertEqual(shm.read(8192, q_bytes), rope.native.query.data)
        self.unregister("err")
        self.assert_rpc_error(invalid, good, "no shared-memory region 'err'",
                              field=f"inputs[query].parameters[{REGION}]")

    # -- Register, Status, Unregister --------------------------------------

    def test_register_status_and_unregister(self):
        shm = self.make_object(8192, "reg")
        register = self.register

        def fails(code, name, key, offset, byte_size, *fragments, field):
            self.assert_rpc_error(
                code, lambda: register(name, key, offset, byte_size),
                *fragments, field=field)

        pid = os.getpid()
        fails(grpc.StatusCode.PERMISSION_DENIED, "r", f"/elsewhere_{pid}", 0, 4096,
              "--shared_memory_key_prefix", "'/phasor'", field="key")
        for key in (f"/phasor_{pid}/x", f"phasor_{pid}_x", f"/phasor_{pid}_../../etc/passwd",
                    "/"):
            with self.subTest(key=key):
                fails(grpc.StatusCode.INVALID_ARGUMENT, "r", key, 0, 4096,
                      "is not a POSIX shared-memory name", field="key")
        fails(grpc.StatusCode.INVALID_ARGUMENT, "r", "", 0, 4096, "must name", field="key")
        fails(grpc.StatusCode.NOT_FOUND, "r", f"/phasor_{pid}_missing", 0, 4096,
              f"/phasor_{pid}_missing", field="key")
        fails(grpc.StatusCode.INVALID_ARGUMENT, "r", shm.key, 4096, 4097,
              "is 8192 bytes; offset 4096 + byte_size 4097 reaches past its end",
              field="byte_size")
        fails(grpc.StatusCode.INVALID_ARGUMENT, "r", shm.key, 0, 0, "must be > 0",
              field="byte_size")
        fails(grpc.StatusCode.INVALID_ARGUMENT, "r", shm.key, (1 << 64) - 4096, 8192,
              "overflows", field="byte_size")
        fails(grpc.StatusCode.INVALID_ARGUMENT, "", shm.key, 0, 4096, "must name the region",
              field="name")

        # Under the prefix but not an object: a symbolic link to a file
        # elsewhere (shm_open does not follow it) and a directory.
        target = os.path.join(tempfile.mkdtemp(prefix="phasor-shm-link-"), "file")
        self.addCleanup(shutil.rmtree, os.path.dirname(target), True)
        with open(target, "wb") as f:
            f.write(b"\0" * 8192)
        link = os.path.join(SHM_DIRECTORY, f"phasor_{pid}_link")
        os.symlink(target, link)
        self.addCleanup(os.unlink, link)
        directory = os.path.join(SHM_DIRECTORY, f"phasor_{pid}_dir")
        os.mkdir(directory)
        self.addCleanup(os.rmdir, directory)
        for path in (link, directory):
            with self.subTest(path=path):
                fails(grpc.StatusCode.INVALID_ARGUMENT, "r",
                      "/" + os.path.basename(path), 0, 4096,
                      "/" + os.path.basename(path), field="key")
        self.assertEqual(self.status(), [])

        register("a", shm.key, 0, 4096)
        register("b", shm.key, 4096, 4096)  # One object, two regions.
        fails(grpc.StatusCode.ALREADY_EXISTS, "a", shm.key, 0, 1024,
              "region 'a' is already registered", field="name")
        self.assertEqual(self.status(), [("a", shm.key, 0, 4096), ("b", shm.key, 4096, 4096)])
        self.assertEqual(self.status("b"), [("b", shm.key, 4096, 4096)])
        self.assert_rpc_error(grpc.StatusCode.NOT_FOUND, lambda: self.status("c"),
                              "no shared-memory region 'c'", field="name")
        self.assert_rpc_error(grpc.StatusCode.NOT_FOUND, lambda: self.unregister("c"),
                              "no shared-memory region 'c'", field="name")
        self.unregister("a")
        self.assertEqual(self.status(), [("b", shm.key, 4096, 4096)])
        register("a", shm.key, 0, 8192)  # The name is free again.
        self.unregister("")
        self.assertEqual(self.status(), [])

    # -- the object changed under the server -------------------------------

    def test_truncated_object_fails_the_call_and_the_server_keeps_serving(self):
        rope = Rope(self.native)
        q_bytes, p_bytes = rope.query.nbytes, rope.positions.nbytes
        shm = self.make_object(65536, "trunc")
        self.register("trunc", shm.key, 0, 65536)
        shm.write(0, rope.query.tobytes())
        shm.write(3072, rope.positions.tobytes())
        call = lambda: self.infer(infer_request(  # noqa: E731
            "rope", rope.inputs(query_at=("trunc", 0, q_bytes),
                                positions_at=("trunc", 3072, p_bytes)),
            [("query", ("trunc", 32768, q_bytes))]))
        call()
        with open(shm.path, "rb") as f:
            f.seek(32768)
            self.assertEqual(f.read(q_bytes), rope.native.query.data)

        # 4096 bytes left: the inputs still fit, the output does not.
        shm.truncate(4096)
        self.assert_rpc_error(grpc.StatusCode.FAILED_PRECONDITION, call,
                              "region 'trunc' is 4096 bytes now",
                              field=f"outputs[query].parameters[{REGION}]")
        self.assert_alive_and_serving(rope)
        # 1024 bytes left: the first input no longer fits.
        shm.truncate(1024)
        self.assert_rpc_error(grpc.StatusCode.FAILED_PRECONDITION, call,
                              "region 'trunc' is 1024 bytes now",
                              field=f"inputs[query].parameters[{REGION}]")
        self.assert_alive_and_serving(rope)
        # The region stays registered; grown back, it serves again.
        self.assertEqual(self.status("trunc"), [("trunc", shm.key, 0, 65536)])
        os.truncate(shm.path, 65536)
        with open(shm.path, "r+b") as f:
            f.write(rope.query.tobytes())
            f.seek(3072)
            f.write(rope.positions.tobytes())
        call()
        with open(shm.path, "rb") as f:
            f.seek(32768)
            self.assertEqual(f.read(q_bytes), rope.native.query.data)

    def test_removed_object_fails_the_call_and_the_server_keeps_serving(self):
        rope = Rope(self.native)
        shm = self.make_object(8192, "gone")
        self.register("gone", shm.key, 0, 8192)
        shm.write(0, rope.query.tobytes())
        os.unlink(shm.path)
        self.assert_rpc_error(
            grpc.StatusCode.FAILED_PRECONDITION,
            lambda: self.infer(infer_request(
                "rope", rope.inputs(query_at=("gone", 0, rope.query.nbytes)))),
            "region 'gone' was removed", field=f"inputs[query].parameters[{REGION}]")
        self.assert_alive_and_serving(rope)
        self.unregister("gone")
        self.assertEqual(self.status(), [])

    def test_unregister_during_calls(self):
        """Calls through a region while another thread unregisters and
        registers it again: each call either answers the native result or
        is INVALID_ARGUMENT naming the region; the server stays up."""
        tokens = 256
        query = values((tokens, 8, 128))  # 1 MiB.
        positions = np.arange(tokens, dtype="<i8")
        native = self.native.ApplyRope(pb.ApplyRopeRequest(
            profile="rope", query=tensor(query, pb.FLOAT32),
            positions=pb.Positions(values=tensor(positions, pb.INT64))),
            timeout=TIMEOUT_S).query.data
        size = 4 * MIB
        shm = self.make_object(size, "churn")
        shm.write(0, query.tobytes())
        shm.write(2 * MIB, positions.tobytes())
        self.register("churn", shm.key, 0, size)
        request = infer_request(
            "rope", [("query", "FP32", query.shape, ("churn", 0, query.nbytes)),
                     ("positions", "INT64", positions.shape,
                      ("churn", 2 * MIB, positions.nbytes))],
            [("query", ("churn", 3 * MIB, query.nbytes))])
        stop = time.monotonic() + 1.5
        outcomes, failures = [], []

        def caller():
            while time.monotonic() < stop:
                try:
                    self.infer(request)
                    outcomes.append("ok")
                except grpc.RpcError as error:
                    outcomes.append("refused")
                    if (error.code() != grpc.StatusCode.INVALID_ARGUMENT
                            or "no shared-memory region 'churn'" not in error.details()):
                        failures.append((error.code(), error.details()))

        def churn():
            while time.monotonic() < stop:
                self.unregister("churn")
                self.register("churn", shm.key, 0, size)

        threads = [threading.Thread(target=caller) for _ in range(3)]
        threads.append(threading.Thread(target=churn))
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=TIMEOUT_S)
        self.assertEqual(failures, [])
        self.assertIn("ok", outcomes)
        self.assertIsNone(self.server.process.poll(), self.server.log())
        self.infer(request)
        self.assertEqual(shm.read(3 * MIB, query.nbytes), native)

    # -- Unregister unmaps -------------------------------------------------

    def test_unregister_unmaps_the_region(self):
        pid = self.server.process.pid
        tokens, heads, dim = 4096, 8, 128  # 16 MiB of FP32 query.
        query = values((tokens, heads, dim))
        positions = np.arange(tokens, dtype="<i8")
        q_bytes = query.nbytes
        shm = self.make_object(256 * MIB, "big")
        at_positions, at_output = 64 * MIB, 128 * MIB
        shm.write(0, query.tobytes())
        shm.write(at_positions, positions.tobytes())
        resident_before = resident_shared_bytes(pid)
        self.assertNotIn(shm.path, mapped_paths(pid))

        self.register("big", shm.key, 0, 256 * MIB)
        self.assertIn(shm.path, mapped_paths(pid))
        response = self.infer(infer_request(
            "rope",
            [("query", "FP32", query.shape, ("big", 0, q_bytes)),
             ("positions", "INT64", positions.shape, ("big", at_positions, positions.nbytes))],
            [("query", ("big", at_output, q_bytes))]))
        self.assertEqual(response.outputs[0].parameters[BYTE_SIZE].int64_param, q_bytes)
        # Rotation is per token: the first tokens' result is the native
        # call's on those tokens.
        head = 8
        native = self.native.ApplyRope(pb.ApplyRopeRequest(
            profile="rope", query=tensor(query[:head], pb.FLOAT32),
            positions=pb.Positions(values=tensor(positions[:head], pb.INT64))),
            timeout=TIMEOUT_S)
        self.assertEqual(shm.read(at_output, query[:head].nbytes), native.query.data)
        # The server read 16 MiB of the region and wrote 16 MiB into it.
        resident_used = resident_shared_bytes(pid)
        self.assertGreaterEqual(resident_used - resident_before, 24 * MIB)

        self.unregister("big")
        # A call's hold on the region may end just after its reply left;
        # the mapping goes when the last holder does.
        deadline = time.monotonic() + 10
        while shm.path in mapped_paths(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        self.assertNotIn(shm.path, mapped_paths(pid))
        self.assertLessEqual(resident_shared_bytes(pid), resident_used - 24 * MIB)
        self.assert_alive_and_serving(Rope(self.native))


class SharedMemoryBoundsTest(ProtocolTestCase):
    """A server with small bounds and its own key prefix."""

    MAX_REGIONS = 8
    MAX_BYTES = 65536

    def test_bounds_and_a_clean_exit_with_regions_registered(self):
        prefix = f"/phasor_{os.getpid()}_bounded"
        server = harness.Server(["--system_shared_memory=true",
                                 f"--shared_memory_key_prefix={prefix}",
                                 f"--shared_memory_max_regions={self.MAX_REGIONS}",
                                 f"--shared_memory_max_bytes={self.MAX_BYTES}"])
        with server:
            channel, oip, _ = self.connect(server.target)
            self.addCleanup(channel.close)

            def register(name, key, byte_size):
                oip.SystemSharedMemoryRegister(ipb.SystemSharedMemoryRegisterRequest(
                    name=name, key=key, offset=0, byte_size=byte_size), timeout=TIMEOUT_S)

            def unregister(name):
                oip.SystemSharedMemoryUnregister(
                    ipb.SystemSharedMemoryUnregisterRequest(name=name), timeout=TIMEOUT_S)

            def count():
                return len(oip.SystemSharedMemoryStatus(
                    ipb.SystemSharedMemoryStatusRequest(), timeout=TIMEOUT_S).regions)

            # The key prefix is the flag's, not the default.
            outside = self.make_object(4096, "outside")
            self.assert_rpc_error(grpc.StatusCode.PERMISSION_DENIED,
                                  lambda: register("x", outside.key, 4096),
                                  f"'{prefix}'", "--shared_memory_key_prefix", field="key")

            objects = [self.make_object(4096, "bounded") for _ in range(self.MAX_REGIONS + 1)]
            for index, shm in enumerate(objects[:-1]):
                register(f"r{index}", shm.key, 4096)
            self.assertEqual(count(), self.MAX_REGIONS)
            self.assert_rpc_error(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                  lambda: register("r8", objects[-1].key, 4096),
                                  "--shared_memory_max_regions", field="name")
            self.assertEqual(count(), self.MAX_REGIONS)
            unregister("r0")
            register("r8", objects[-1].key, 4096)  # Room again.
            unregister("")

            # Bytes: 61440 registered, 8192 more would pass 65536, 4096 fit.
            large = self.make_object(self.MAX_BYTES + 4096, "bounded")
            register("a", large.key, 32768)
            register("b", large.key, 28672)
            self.assert_rpc_error(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                  lambda: register("c", large.key, 8192),
                                  "61440 bytes are registered", "--shared_memory_max_bytes",
                                  field="byte_size")
            register("c", large.key, 4096)
            unregister("")
            self.assert_rpc_error(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                  lambda: register("d", large.key, self.MAX_BYTES + 1),
                                  "--shared_memory_max_bytes", field="byte_size")
            register("d", large.key, self.MAX_BYTES)
            self.assertEqual(count(), 1)
            # Shutdown with a region still registered unmaps it and exits 0.
            self.assertEqual(server.stop(), 0, server.log())


class SharedMemoryBudgetTest(ProtocolTestCase):
    """Outputs written into a region take none of the server's memory
    budget (--memory_budget_bytes): a call whose tensors are larger than the
    whole budget is refused as too large when they travel in the messages,
    and answered when inputs and outputs lie in shared memory."""

    BUDGET = 8 * MIB

    def test_outputs_in_a_region_are_not_charged_to_the_budget(self):
        _, profiles = self.scratch_profiles("phasor-shm-budget-")
        server = harness.Server([f"--profiles={profiles}", "--system_shared_memory=true",
                                 f"--memory_budget_bytes={self.BUDGET}"])
        with server:
            channel, oip, native = self.connect(server.target)
            self.addCleanup(channel.close)
            # RoPE: a 12 MiB query [24576, 4, 32] in, 12 MiB out.
            tokens = 24576
            query = values((tokens, 4, 32))
            positions = np.arange(tokens, dtype="<i8")
            # Positional: 320,000 positions of dim 8, 9.8 MiB of FP32 out.
            count = 320_000
            sin_positions = np.arange(count, dtype="<i8")
            rope_inputs = [("query", "FP32", query.shape, query.tobytes()),
                           ("positions", "INT64", positions.shape, positions.tobytes())]
            sin_inputs = [("positions", "INT64", sin_positions.shape,
                           sin_positions.tobytes())]
            for model, inputs in (("rope", rope_inputs), ("sin", sin_inputs)):
                self.assert_rpc_error(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    lambda: oip.ModelInfer(infer_request(model, inputs), timeout=TIMEOUT_S),
                    "whole memory budget")

            # The same calls with inputs and outputs in a region.
            shm = self.make_object(64 * MIB, "budget")
            oip.SystemSharedMemoryRegister(ipb.SystemSharedMemoryRegisterRequest(
                name="r", key=shm.key, offset=0, byte_size=64 * MIB), timeout=TIMEOUT_S)
            shm.write(0, query.tobytes())
            shm.write(12 * MIB, positions.tobytes())
            oip.ModelInfer(infer_request(
                "rope", [("query", "FP32", query.shape, ("r", 0, query.nbytes)),
                         ("positions", "INT64", positions.shape,
                          ("r", 12 * MIB, positions.nbytes))],
                [("query", ("r", 16 * MIB, query.nbytes))]), timeout=TIMEOUT_S)
            want = native.ApplyRope(pb.ApplyRopeRequest(
                profile="rope", query=tensor(query[-8:], pb.FLOAT32),
                positions=pb.Positions(values=tensor(positions[-8:], pb.INT64))),
                timeout=TIMEOUT_S).query.data
            self.assertEqual(shm.read(16 * MIB + query.nbytes - len(want), len(want)), want)

            sin_bytes = count * 8 * 4
            shm.write(32 * MIB, sin_positions.tobytes())
            oip.ModelInfer(infer_request(
                "sin", [("positions", "INT64", sin_positions.shape,
                         ("r", 32 * MIB, sin_positions.nbytes))],
                [("encodings", ("r", 36 * MIB, sin_bytes))]), timeout=TIMEOUT_S)
            want = native.EncodePositions(pb.EncodePositionsRequest(
                profile="sin", positions=pb.Positions(
                    values=tensor(sin_positions[-4:], pb.INT64))),
                timeout=TIMEOUT_S).encodings.data
            self.assertEqual(shm.read(36 * MIB + sin_bytes - len(want), len(want)), want)
            self.assertEqual(server.stop(), 0, server.log())


class SharedMemoryTokenTest(ProtocolTestCase):
    """With --auth_token_file the shared-memory RPCs need the token, as
    ModelInfer does."""

    def test_shared_memory_rpcs_need_the_token(self):
        tmp = tempfile.mkdtemp(prefix="phasor-shm-token-")
        self.addCleanup(shutil.rmtree, tmp, True)
        token_file = os.path.join(tmp, "token")
        token = "shm-token-0123456789abcdef"
        with open(token_file, "w") as f:
            f.write(token + "\n")
        server = harness.Server(["--system_shared_memory=true",
                                 f"--auth_token_file={token_file}"])
        with server:
            channel, oip, _ = self.connect(server.target)
            self.addCleanup(channel.close)
            shm = self.make_object(4096, "token")
            register = ipb.SystemSharedMemoryRegisterRequest(
                name="t", key=shm.key, offset=0, byte_size=4096)
            calls = [(oip.SystemSharedMemoryRegister, register),
                     (oip.SystemSharedMemoryStatus, ipb.SystemSharedMemoryStatusRequest()),
                     (oip.SystemSharedMemoryUnregister,
                      ipb.SystemSharedMemoryUnregisterRequest())]
            for rpc, request in calls:
                for metadata in ((), (("authorization", "Bearer wrong"),)):
                    self.assert_rpc_error(
                        grpc.StatusCode.UNAUTHENTICATED,
                        lambda: rpc(request, metadata=metadata, timeout=TIMEOUT_S))
            right = (("authorization", f"Bearer {token}"),)
            oip.SystemSharedMemoryRegister(register, metadata=right, timeout=TIMEOUT_S)
            regions = oip.SystemSharedMemoryStatus(ipb.SystemSharedMemoryStatusRequest(),
                                                   metadata=right, timeout=TIMEOUT_S).regions
            self.assertEqual(list(regions), ["t"])
            oip.SystemSharedMemoryUnregister(ipb.SystemSharedMemoryUnregisterRequest(),
                                             metadata=right, timeout=TIMEOUT_S)


class UnixSocketTest(ProtocolTestCase):
    """gRPC on a Unix-domain socket: --grpc_address=unix:PATH."""

    def test_model_infer_and_encode_positions_over_a_unix_socket(self):
        tmp, profiles = self.scratch_profiles("phasor-unix-")
        path = os.path.join(tmp, "phasor.sock")
        # A 1 MiB message limit, which bounds messages, not regions.
        server = harness.Server([f"--profiles={profiles}", "--system_shared_memory=true",
                                 "--max_message_bytes=1048576"],
                                unix_socket=path)
        with server:
            self.assertTrue(stat.S_ISSOCK(os.stat(path).st_mode))
            self.assertEqual(server.target, f"unix:{path}")
            channel, oip, native = self.connect(server.target)
            self.addCleanup(channel.close)

            positions = np.array([0, 3, 7, -2, 1 << 40], dtype="<i8")
            encoded = native.EncodePositions(pb.EncodePositionsRequest(
                profile="sin", positions=pb.Positions(values=tensor(positions, pb.INT64))),
                timeout=TIMEOUT_S)
            self.assertEqual(list(encoded.encodings.shape), [5, 8])
            # Row 0 is position 0: sin 0 = 0, cos 0 = 1, interleaved.
            row0 = np.frombuffer(encoded.encodings.data, dtype="<f4")[:8]
            self.assertEqual(row0.tolist(), [0, 1] * 4)
            response = oip.ModelInfer(infer_request(
                "sin", [("positions", "INT64", positions.shape, positions.tobytes())]),
                timeout=TIMEOUT_S)
            self.assertEqual(response.raw_output_contents[0], encoded.encodings.data)

            # Shared memory over the socket: the output lands in the region.
            shm = self.make_object(4096, "unix")
            oip.SystemSharedMemoryRegister(ipb.SystemSharedMemoryRegisterRequest(
                name="u", key=shm.key, offset=0, byte_size=4096), timeout=TIMEOUT_S)
            shm.write(0, positions.tobytes())
            response = oip.ModelInfer(infer_request(
                "sin", [("positions", "INT64", positions.shape, ("u", 0, positions.nbytes))],
                [("encodings", ("u", 1024, len(encoded.encodings.data)))]),
                timeout=TIMEOUT_S)
            self.assertEqual(list(response.raw_output_contents), [b""])
            self.assertEqual(shm.read(1024, len(encoded.encodings.data)),
                             encoded.encodings.data)

            # 2 MiB in and out through a region past the 1 MiB message
            # limit; the same output in the reply is over it.
            query = values((512, 8, 128))
            tokens = np.arange(512, dtype="<i8")
            big = self.make_object(8 * MIB, "unix")
            oip.SystemSharedMemoryRegister(ipb.SystemSharedMemoryRegisterRequest(
                name="big", key=big.key, offset=0, byte_size=8 * MIB), timeout=TIMEOUT_S)
            big.write(0, query.tobytes())
            big.write(3 * MIB, tokens.tobytes())
            inputs = [("query", "FP32", query.shape, ("big", 0, query.nbytes)),
                      ("positions", "INT64", tokens.shape, ("big", 3 * MIB, tokens.nbytes))]
            oip.ModelInfer(infer_request("rope", inputs,
                                         [("query", ("big", 4 * MIB, query.nbytes))]),
                           timeout=TIMEOUT_S)
            native_head = native.ApplyRope(pb.ApplyRopeRequest(
                profile="rope", query=tensor(query[:16], pb.FLOAT32),
                positions=pb.Positions(values=tensor(tokens[:16], pb.INT64))),
                timeout=TIMEOUT_S).query.data
            self.assertEqual(big.read(4 * MIB, len(native_head)), native_head)
            self.assert_rpc_error(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                lambda: oip.ModelInfer(infer_request("rope", inputs), timeout=TIMEOUT_S),
                "--max_message_bytes")
            self.assertEqual(server.stop(), 0, server.log())


if __name__ == "__main__":
    unittest.main()
