"""The Open Inference Protocol against the real phasor-server, with a client
written from the protocol's documentation (KServe "Predict Protocol -
Version 2", its GRPC section and "Tensor Data Types" table).

The client compiles proto/inference/grpc_service.proto with protoc at test
start and calls the service with grpc's generic unary calls; before any
call, the compiled descriptor is checked field by field against the
documentation's messages (names, numbers, types), so the client is the
documentation's and not merely the server's own view of it. Tensors are
numpy arrays laid out as the documentation says: raw contents flattened
row-major, little-endian, no padding; BYTES elements each after a 4-byte
little-endian length (Triton's convention for raw BYTES).

Every ModelInfer result is compared byte for byte with the native
phasor.v1.Encoder RPC on the same inputs.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import grpc
import numpy as np

import harness
from phasor_client import _stubs

pb = _stubs.encoder_pb2
pb_grpc = _stubs.encoder_pb2_grpc
TIMEOUT_S = harness.CLIENT_TIMEOUT_S
NS = 1_000_000_000
START_NS = 1_772_949_600 * NS  # 2026-03-08 06:00 UTC

# The documentation's messages: field name -> (number, type, repeated).
# Types as protobuf's descriptor names them (9 string, 8 bool, 3 int64,
# 4 uint64, 1 double, 2 float, 5 int32, 13 uint32, 12 bytes, 11 message).
DOCUMENTED = {
    "ServerLiveResponse": {"live": (1, 8, False)},
    "ServerReadyResponse": {"ready": (1, 8, False)},
    "ModelReadyRequest": {"name": (1, 9, False), "version": (2, 9, False)},
    "ModelReadyResponse": {"ready": (1, 8, False)},
    "ServerMetadataResponse": {"name": (1, 9, False), "version": (2, 9, False),
                               "extensions": (3, 9, True)},
    "ModelMetadataRequest": {"name": (1, 9, False), "version": (2, 9, False)},
    "ModelMetadataResponse": {"name": (1, 9, False), "versions": (2, 9, True),
                              "platform": (3, 9, False), "inputs": (4, 11, True),
                              "outputs": (5, 11, True)},
    "ModelMetadataResponse.TensorMetadata": {"name": (1, 9, False),
                                             "datatype": (2, 9, False),
                                             "shape": (3, 3, True)},
    "ModelInferRequest": {"model_name": (1, 9, False), "model_version": (2, 9, False),
                          "id": (3, 9, False), "parameters": (4, 11, True),
                          "inputs": (5, 11, True), "outputs": (6, 11, True),
                          "raw_input_contents": (7, 12, True)},
    "ModelInferRequest.InferInputTensor": {"name": (1, 9, False),
                                           "datatype": (2, 9, False),
                                           "shape": (3, 3, True),
                                           "parameters": (4, 11, True),
                                           "contents": (5, 11, False)},
    "ModelInferRequest.InferRequestedOutputTensor": {"name": (1, 9, False),
                                                     "parameters": (2, 11, True)},
    "ModelInferResponse": {"model_name": (1, 9, False), "model_version": (2, 9, False),
                           "id": (3, 9, False), "parameters": (4, 11, True),
                           "outputs": (5, 11, True), "raw_output_contents": (6, 12, True)},
    "ModelInferResponse.InferOutputTensor": {"name": (1, 9, False),
                                             "datatype": (2, 9, False),
                                             "shape": (3, 3, True),
                                             "parameters": (4, 11, True),
                                             "contents": (5, 11, False)},
    "InferParameter": {"bool_param": (1, 8, False), "int64_param": (2, 3, False),
                       "string_param": (3, 9, False)},
    "InferTensorContents": {"bool_contents": (1, 8, True), "int_contents": (2, 5, True),
                            "int64_contents": (3, 3, True),
                            "uint_contents": (4, 13, True),
                            "uint64_contents": (5, 4, True),
                            "fp32_contents": (6, 2, True), "fp64_contents": (7, 1, True),
                            "bytes_contents": (8, 12, True)},
    # Triton's "System Shared-Memory Extension".
    "SystemSharedMemoryStatusRequest": {"name": (1, 9, False)},
    "SystemSharedMemoryStatusResponse": {"regions": (1, 11, True)},
    "SystemSharedMemoryStatusResponse.RegionStatus": {"name": (1, 9, False),
                                                      "key": (2, 9, False),
                                                      "offset": (3, 4, False),
                                                      "byte_size": (4, 4, False)},
    "SystemSharedMemoryRegisterRequest": {"name": (1, 9, False), "key": (2, 9, False),
                                          "offset": (3, 4, False),
                                          "byte_size": (4, 4, False)},
    "SystemSharedMemoryUnregisterRequest": {"name": (1, 9, False)},
}
RPCS = {"ServerLive": ("ServerLiveRequest", "ServerLiveResponse"),
        "ServerReady": ("ServerReadyRequest", "ServerReadyResponse"),
        "ModelReady": ("ModelReadyRequest", "ModelReadyResponse"),
        "ServerMetadata": ("ServerMetadataRequest", "ServerMetadataResponse"),
        "ModelMetadata": ("ModelMetadataRequest", "ModelMetadataResponse"),
        "ModelInfer": ("ModelInferRequest", "ModelInferResponse"),
        # Triton's system shared-memory extension.
        "SystemSharedMemoryStatus": ("SystemSharedMemoryStatusRequest",
                                     "SystemSharedMemoryStatusResponse"),
        "SystemSharedMemoryRegister": ("SystemSharedMemoryRegisterRequest",
                                       "SystemSharedMemoryRegisterResponse"),
        "SystemSharedMemoryUnregister": ("SystemSharedMemoryUnregisterRequest",
                                         "SystemSharedMemoryUnregisterResponse")}

# "Tensor Data Types": the documentation's names and numpy's little-endian
# types. BF16 has no numpy type: its elements travel as uint16 bits.
DATATYPES = {"BOOL": "|b1", "UINT8": "|u1", "INT32": "<i4", "INT64": "<i8",
             "FP16": "<f2", "FP32": "<f4", "FP64": "<f8", "BF16": "<u2"}

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
profile {
  name: "t5"
  spec { relative_bias { t5 { num_buckets: 8 max_distance: 20 } table: "rel" } }
  learned_tables { name: "rel" file { path: "rel.npy" } }
}
"""


def compile_protocol(directory):
    """The generated module of proto/inference/grpc_service.proto."""
    protoc = shutil.which("protoc") or "/usr/bin/protoc"
    proto_dir = os.path.join(harness.SOURCE_DIR, "proto")
    subprocess.run([protoc, f"--python_out={directory}", f"-I{proto_dir}",
                    os.path.join(proto_dir, "inference", "grpc_service.proto")],
                   check=True)
    sys.path.insert(0, directory)
    from inference import grpc_service_pb2  # noqa: E402
    return grpc_service_pb2


def bf16_bits(values):
    """float32 values rounded to bfloat16 bits (nearest, ties to even)."""
    bits = np.asarray(values, dtype="<f4").view("<u4").astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2")


def values(shape, scale=1.0):
    count = int(np.prod(shape))
    return (np.sin(np.arange(count) * 0.37) * scale).astype("<f4").reshape(shape)


class OipClient:
    """One method per RPC of inference.GRPCInferenceService, a deadline on
    every call, over grpc's generic unary calls."""

    def __init__(self, channel, messages):
        self.messages = messages
        self._calls = {}
        for rpc, (request, response) in RPCS.items():
            self._calls[rpc] = channel.unary_unary(
                f"/inference.GRPCInferenceService/{rpc}",
                request_serializer=lambda message: message.SerializeToString(),
                response_deserializer=getattr(messages, response).FromString)

    def call(self, rpc, request=None, metadata=None):
        if request is None:
            request = getattr(self.messages, RPCS[rpc][0])()
        return self._calls[rpc](request, timeout=TIMEOUT_S, metadata=metadata)

    def request(self, model, inputs, parameters=None, outputs=(), typed=False):
        """A ModelInferRequest: inputs is a list of (name, datatype, array);
        raw contents unless typed (then the datatype's contents field)."""
        request = self.messages.ModelInferRequest(model_name=model)
        for name, datatype, array in inputs:
            tensor = request.inputs.add(name=name, datatype=datatype,
                                        shape=list(np.shape(array)))
            if datatype == "BYTES":
                elements = [bytes(e) for e in np.asarray(array, dtype=object).ravel()]
                if typed:
                    tensor.contents.bytes_contents.extend(elements)
                else:
                    request.raw_input_contents.append(b"".join(
                        len(e).to_bytes(4, "little") + e for e in elements))
                continue
            flat = np.ascontiguousarray(array, dtype=DATATYPES[datatype]).ravel()
            if not typed:
                request.raw_input_contents.append(flat.tobytes())
                continue
            field = {"BOOL": "bool_contents", "UINT8": "uint_contents",
                     "INT32": "int_contents", "INT64": "int64_contents",
                     "FP32": "fp32_contents", "FP64": "fp64_contents"}[datatype]
            getattr(tensor.contents, field).extend(flat.tolist())
        for key, value in (parameters or {}).items():
            if isinstance(value, bool):
                request.parameters[key].bool_param = value
            elif isinstance(value, int):
                request.parameters[key].int64_param = value
            else:
                request.parameters[key].string_param = value
        for name in outputs:
            request.outputs.add(name=name)
        return request

    @staticmethod
    def outputs(response):
        """name -> (datatype, shape, raw bytes, output message)."""
        assert len(response.raw_output_contents) == len(response.outputs)
        return {o.name: (o.datatype, list(o.shape), raw, o)
                for o, raw in zip(response.outputs, response.raw_output_contents)}

    @staticmethod
    def bytes_elements(raw):
        out, at = [], 0
        while at < len(raw):
            length = int.from_bytes(raw[at:at + 4], "little")
            out.append(raw[at + 4:at + 4 + length])
            at += 4 + length
        return out


violation = harness.violation
tensor = harness.native_tensor


class InferenceProtocolTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="phasor-oip-")
        cls.messages = compile_protocol(cls.tmp)
        table = np.arange(8 * 3, dtype="<f4").reshape(8, 3) * 0.25 - 2
        np.save(os.path.join(cls.tmp, "rel.npy"), table)
        profiles = os.path.join(cls.tmp, "profiles.txtpb")
        with open(profiles, "w") as f:
            f.write(PROFILES)
        cls.server = harness.Server([f"--profiles={profiles}"]).start()
        cls.channel = grpc.insecure_channel(
            cls.server.target,
            options=[("grpc.max_receive_message_length", 64 << 20),
                     ("grpc.max_send_message_length", 64 << 20)])
        cls.oip = OipClient(cls.channel, cls.messages)
        cls.native = pb_grpc.EncoderStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.server.stop()
        cls.server.kill()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_compiled_protocol_matches_the_documentation(self):
        descriptor = self.messages.DESCRIPTOR
        self.assertEqual(descriptor.package, "inference")
        service = descriptor.services_by_name["GRPCInferenceService"]
        self.assertEqual(sorted(m.name for m in service.methods), sorted(RPCS))
        for method in service.methods:
            request, response = RPCS[method.name]
            self.assertEqual(method.input_type.full_name, f"inference.{request}")
            self.assertEqual(method.output_type.full_name, f"inference.{response}")
        for name, fields in DOCUMENTED.items():
            message = descriptor.message_types_by_name[name.split(".")[0]]
            if "." in name:
                message = message.nested_types_by_name[name.split(".")[1]]
            for field_name, (number, kind, repeated) in fields.items():
                field = message.fields_by_name[field_name]
                self.assertEqual(field.number, number, f"{name}.{field_name}")
                self.assertEqual(field.type, kind, f"{name}.{field_name}")
                self.assertEqual(field.label == field.LABEL_REPEATED, repeated,
                                 f"{name}.{field_name}")
        # InferParameter's choices are one oneof.
        oneof = descriptor.message_types_by_name["InferParameter"].oneofs_by_name
        self.assertIn("parameter_choice", oneof)

    def test_health_and_metadata(self):
        self.assertTrue(self.oip.call("ServerLive").live)
        self.assertTrue(self.oip.call("ServerReady").ready)
        metadata = self.oip.call("ServerMetadata")
        self.assertEqual(metadata.name, "phasor")
        self.assertTrue(metadata.version)
        self.assertIn("parameters", metadata.extensions)
        # Shared memory is off unless the server is started with it.
        self.assertNotIn("system_shared_memory", metadata.extensions)
        self.assertNotIn("cuda_shared_memory", metadata.extensions)
        with self.assertRaises(grpc.RpcError) as caught:
            self.oip.call("SystemSharedMemoryStatus")
        self.assertEqual(caught.exception.code(), grpc.StatusCode.UNIMPLEMENTED)
        self.assertIn("--system_shared_memory=true", caught.exception.details())
        for model in ("sin", "rope", "vitals", "t5"):
            for version in ("", "1"):
                self.assertTrue(self.oip.call("ModelReady", self.messages.ModelReadyRequest(
                    name=model, version=version)).ready)
        described = self.oip.call("ModelMetadata",
                                  self.messages.ModelMetadataRequest(name="sin"))
        self.assertEqual(list(described.versions), ["1"])
        self.assertEqual([(t.name, t.datatype, list(t.shape)) for t in described.outputs],
                         [("encodings", "FP32", [-1, 8])])
        with self.assertRaises(grpc.RpcError) as caught:
            self.oip.call("ModelMetadata", self.messages.ModelMetadataRequest(name="nope"))
        self.assertEqual(caught.exception.code(), grpc.StatusCode.NOT_FOUND)
        self.assertIn("nope", caught.exception.details())

    def test_rope_in_each_float_type_matches_apply_rope(self):
        query32, key32 = values((5, 4, 32)), values((5, 2, 32), 0.5)
        positions = np.array([0, 1, 2, 100, 1 << 33], dtype="<i8")
        cases = [("FP32", query32, key32, pb.FLOAT32),
                 ("FP16", query32.astype("<f2"), key32.astype("<f2"), pb.FLOAT16),
                 ("BF16", bf16_bits(query32), bf16_bits(key32), pb.BFLOAT16),
                 ("FP64", query32.astype("<f8"), key32.astype("<f8"), pb.FLOAT64)]
        for datatype, query, key, dtype in cases:
            with self.subTest(datatype):
                native = self.native.ApplyRope(pb.ApplyRopeRequest(
                    profile="rope", query=tensor(query, dtype), key=tensor(key, dtype),
                    positions=pb.Positions(values=tensor(positions, pb.INT64))),
                    timeout=TIMEOUT_S)
                response = self.oip.call("ModelInfer", self.oip.request(
                    "rope", [("query", datatype, query), ("key", datatype, key),
                             ("positions", "INT64", positions)]))
                outputs = self.oip.outputs(response)
                self.assertEqual(outputs["query"][:3], (datatype, [5, 4, 32],
                                                         native.query.data))
                self.assertEqual(outputs["key"][:3], (datatype, [5, 2, 32], native.key.data))
                self.assertEqual(response.model_name, "rope")
                self.assertEqual(response.model_version, "1")
                self.assertEqual(response.parameters["attention_factor"].double_param,
                                 native.attention_factor)

    def test_positions_raw_and_typed_match_encode_positions(self):
        positions = np.array([0, 3, 7, -2], dtype="<i8")
        content = values((4, 8))
        native = self.native.EncodePositions(pb.EncodePositionsRequest(
            profile="sin", positions=pb.Positions(values=tensor(positions, pb.INT64)),
            content=tensor(content, pb.FLOAT32), content_scale=2.0,
            output_dtype=pb.FLOAT16), timeout=TIMEOUT_S)
        for typed in (False, True):
            with self.subTest(typed=typed):
                request = self.oip.request(
                    "sin", [("positions", "INT64", positions), ("content", "FP32", content)],
                    parameters={"output_dtype": "FP16", "content_scale": 2}, typed=typed)
                encodings = self.oip.outputs(self.oip.call("ModelInfer", request))["encodings"]
                self.assertEqual(encodings[:3], ("FP16", [4, 8], native.encodings.data))

    def test_observations_in_chunks_carry_their_state(self):
        rows, channels = 8, 2
        times = START_NS + np.arange(rows, dtype="<i8") * 1800 * NS
        series = values((rows, channels))
        series[1, 0] = np.nan
        whole = self.native.EncodeObservations(pb.EncodeObservationsRequest(
            profile="vitals", observations=pb.Observations(
                timestamps=tensor(times, pb.INT64), values=tensor(series, pb.FLOAT32),
                channel_names=["hr", "spo2"])), timeout=TIMEOUT_S)
        features, state = b"", None
        for begin in (0, 3):
            end = 3 if begin == 0 else rows
            inputs = [("timestamps", "INT64", times[begin:end]),
                      ("values", "FP32", series[begin:end]),
                      ("channel_names", "BYTES", np.array([b"hr", b"spo2"], dtype=object))]
            if state is not None:
                inputs.append(("state", "BYTES", np.array([state], dtype=object)))
            outputs = self.oip.outputs(self.oip.call(
                "ModelInfer", self.oip.request("vitals", inputs)))
            datatype, shape, raw, message = outputs["features"]
            self.assertEqual((datatype, shape[0]), ("FP32", end - begin))
            features += raw
            self.assertEqual(outputs["state"][:2], ("BYTES", [1]))
            (state,) = self.oip.bytes_elements(outputs["state"][2])
            schema = json.loads(message.parameters["schema"].string_param)
            self.assertEqual([e["block"] for e in schema], [e.block for e in whole.schema])
        # The chunks' features are the whole series' features.
        self.assertEqual(features, whole.features.data)

    def test_relative_bias_matches_relative_bias(self):
        queries = np.array([4, 5], dtype="<i8")
        keys = np.arange(7, dtype="<i8")
        native = self.native.RelativeBias(pb.RelativeBiasRequest(
            profile="t5", query_positions=pb.Positions(values=tensor(queries, pb.INT64)),
            key_positions=pb.Positions(values=tensor(keys, pb.INT64)),
            include_bucket_ids=True), timeout=TIMEOUT_S)
        outputs = self.oip.outputs(self.oip.call("ModelInfer", self.oip.request(
            "t5", [("query_positions", "INT64", queries), ("key_positions", "INT64", keys)],
            outputs=("bucket_ids", "bias"))))
        self.assertEqual(list(outputs), ["bucket_ids", "bias"])
        self.assertEqual(outputs["bias"][:3], ("FP32", [3, 2, 7], native.bias.data))
        self.assertEqual(outputs["bucket_ids"][:3], ("INT32", [2, 7], native.bucket_ids.data))

    def test_errors_name_the_field(self):
        query = values((2, 1, 16))
        positions = np.array([0, 1], dtype="<i8")
        cases = [
            (self.oip.request("gpt", [("query", "FP32", query)]),
             grpc.StatusCode.NOT_FOUND, "model_name"),
            (self.oip.request("rope", [("query", "INT64", query.astype("<i8")),
                                       ("positions", "INT64", positions)]),
             grpc.StatusCode.INVALID_ARGUMENT, "inputs[query].datatype"),
            (self.oip.request("rope", [("query", "FP32", query),
                                       ("posititons", "INT64", positions)]),
             grpc.StatusCode.INVALID_ARGUMENT, "inputs[posititons]"),
            (self.oip.request("rope", [("query", "FP32", query[0]),
                                       ("positions", "INT64", positions)]),
             grpc.StatusCode.INVALID_ARGUMENT, "inputs[query].shape"),
            (self.oip.request("rope", [("query", "FP32", query),
                                       ("positions", "INT64", positions)],
                              parameters={"output_dtype": "FP16"}),
             grpc.StatusCode.INVALID_ARGUMENT, "parameters[output_dtype]"),
        ]
        raw_and_typed = self.oip.request("rope", [("query", "FP32", query),
                                                  ("positions", "INT64", positions)])
        raw_and_typed.inputs[1].contents.int64_contents.extend([0, 1])
        cases.append((raw_and_typed, grpc.StatusCode.INVALID_ARGUMENT,
                      "inputs[positions].contents"))
        short = self.oip.request("rope", [("query", "FP32", query),
                                          ("positions", "INT64", positions)])
        short.raw_input_contents[0] = short.raw_input_contents[0][:-4]
        cases.append((short, grpc.StatusCode.INVALID_ARGUMENT, "inputs[query]"))
        for request, code, field in cases:
            with self.subTest(field):
                with self.assertRaises(grpc.RpcError) as caught:
                    self.oip.call("ModelInfer", request)
                self.assertEqual(caught.exception.code(), code,
                                 caught.exception.details())
                self.assertEqual(violation(caught.exception), field,
                                 caught.exception.details())

    def test_phasor_client_infer(self):
        """phasor-client infer: inputs from .npy, outputs to .npy, a state
        file carried from one chunk to the next."""
        query = values((3, 2, 16)).astype("<f2")
        positions = np.array([4, 5, 6], dtype="<i8")
        native = self.native.ApplyRope(pb.ApplyRopeRequest(
            profile="rope", query=tensor(query, pb.FLOAT16),
            positions=pb.Positions(values=tensor(positions, pb.INT64))), timeout=TIMEOUT_S)
        with tempfile.TemporaryDirectory() as directory:
            def path(name):
                return os.path.join(directory, name)

            def client(*args):
                result = subprocess.run(
                    [harness.CLIENT_BIN, f"--target={self.server.target}", "infer", *args],
                    capture_output=True, text=True, timeout=TIMEOUT_S)
                return result

            np.save(path("q.npy"), query)
            np.save(path("p.npy"), positions)
            result = client("--model=rope", f"--inputs=query={path('q.npy')},"
                            f"positions={path('p.npy')}", f"--outputs=query={path('out.npy')}")
            self.assertEqual(result.returncode, 0, result.stderr)
            rotated = np.load(path("out.npy"))
            self.assertEqual((rotated.dtype, rotated.shape), (np.dtype("<f2"), (3, 2, 16)))
            self.assertEqual(rotated.tobytes(), native.query.data)
            self.assertIn("attention_factor = 1", result.stdout)

            times = START_NS + np.arange(4, dtype="<i8") * 60 * NS
            series = values((4, 1))
            np.save(path("t1.npy"), times[:2])
            np.save(path("v1.npy"), series[:2])
            np.save(path("t2.npy"), times[2:])
            np.save(path("v2.npy"), series[2:])
            result = client("--model=vitals", f"--inputs=timestamps={path('t1.npy')},"
                            f"values={path('v1.npy')}", "--parameters=output_dtype=FP64",
                            f"--outputs=features={path('f1.npy')},state={path('state.bin')}")
            self.assertEqual(result.returncode, 0, result.stderr)
            result = client("--model=vitals", f"--inputs=timestamps={path('t2.npy')},"
                            f"values={path('v2.npy')},state={path('state.bin')}",
                            "--parameters=output_dtype=FP64",
                            f"--outputs=features={path('f2.npy')}")
            self.assertEqual(result.returncode, 0, result.stderr)
            whole = self.native.EncodeObservations(pb.EncodeObservationsRequest(
                profile="vitals", output_dtype=pb.FLOAT64, observations=pb.Observations(
                    timestamps=tensor(times, pb.INT64), values=tensor(series, pb.FLOAT32))),
                timeout=TIMEOUT_S)
            chunks = np.concatenate([np.load(path("f1.npy")), np.load(path("f2.npy"))])
            self.assertEqual(chunks.tobytes(), whole.features.data)

            # An error names the field, as for every command.
            result = client("--model=rope", f"--inputs=query={path('q.npy')}")
            self.assertEqual(result.returncode, 1)
            self.assertIn("inputs[positions]", result.stderr)

    def test_calls_are_counted_in_metrics(self):
        self.oip.call("ServerLive")
        text = self.server.metrics()
        self.assertIn('grpc_service="inference.GRPCInferenceService"', text)
        self.assertRegex(text, r'grpc_server_handled_total\{grpc_code="OK",'
                               r'grpc_method="ServerLive",'
                               r'grpc_service="inference.GRPCInferenceService",'
                               r'grpc_type="unary"\} [1-9]')


class InferenceProtocolOffTest(unittest.TestCase):

    def test_flag_and_environment_turn_it_off(self):
        with tempfile.TemporaryDirectory() as directory:
            messages = compile_protocol(directory)
            for flags, env in ((["--enable_inference_protocol=false"], {}),
                               ([], {"PHASOR_ENABLE_INFERENCE_PROTOCOL": "false"})):
                with harness.Server(flags, env=env) as server:
                    with grpc.insecure_channel(server.target) as channel:
                        with self.assertRaises(grpc.RpcError) as caught:
                            OipClient(channel, messages).call("ServerLive")
                        self.assertEqual(caught.exception.code(),
                                         grpc.StatusCode.UNIMPLEMENTED)


if __name__ == "__main__":
    unittest.main()
