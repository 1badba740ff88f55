"""Replies whose large tensors are views of the received bytes
(phasor_client/_wire.py).

- On messages built here: an Outgoing request, its tensors appended from
  their arrays, parses to the very message that holds them (nested fields,
  bfloat16, empty arrays); a field already set is refused; small arrays go
  into the message. A detached reply reads as the parsed message
  (fields, HasField, ByteSize, tensor values bytewise); tensors below the
  threshold stay in the message; what the walker must not handle itself — a
  tensor field given twice (protobuf merges the two), truncated bytes,
  unknown fields — comes out as protobuf parses it, or raises as protobuf
  raises.
- Against a real phasor-server: every tensor-carrying call (EncodePositions
  with and without content, ApplyRope, RopeTables, AlibiBias, RelativeBias,
  EncodeObservations wide, long, panel and stream) gives the same bytes with
  detaching (of requests and replies) on and off, and with it on the large
  results are views of the reply (no copy).
"""

import unittest

import numpy as np
from google.protobuf import message as protobuf_message

import harness
from phasor_client import _wire, pb
from phasor_client.tensors import attach, from_tensor, to_tensor

OBSERVATIONS_SPEC = """temporal {
  time { dim: 8 }
  gaps { include_mask: true }
  calendar { time_zone: "America/New_York"
             fields: [HOUR_OF_DAY, DAY_OF_WEEK, MONTH_OF_YEAR] }
}"""
DESERIALIZE = _wire.detaching(pb.EncodeObservationsResponse, pb.Tensor)


def big_response(rows=4096, width=21, series=3):
    features = np.arange(rows * width, dtype=np.float32).reshape(rows, width)
    response = pb.EncodeObservationsResponse(
        features=to_tensor(features),
        series_offsets=to_tensor(np.array([0, 1, rows], dtype=np.int64)))
    response.schema.add(block="time", offset=0, width=8, meaning="sin/cos")
    for s in range(series):
        response.states.add().last_timestamp_ns = 1000 + s
    return response, features


class DetachOnMessages(unittest.TestCase):

    def test_detached_reply_reads_as_the_parsed_message(self):
        response, features = big_response()
        wire = response.SerializeToString()
        reply = DESERIALIZE(wire)
        self.assertIsInstance(reply, _wire.Reply)
        self.assertIsInstance(reply.features, _wire.DetachedTensor)
        self.assertEqual(reply.features.shape, tuple(response.features.shape))
        self.assertEqual(reply.features.dtype, response.features.dtype)
        self.assertEqual(bytes(reply.features.data), response.features.data)
        array = from_tensor(reply.features)
        np.testing.assert_array_equal(array, features)
        self.assertIsInstance(owner(array), memoryview)
        self.assertTrue(reply.HasField("features"))
        self.assertFalse(reply.HasField("state"))
        self.assertEqual(reply.ByteSize(), response.ByteSize())
        self.assertEqual(list(reply.schema), list(response.schema))
        self.assertEqual([s.last_timestamp_ns for s in reply.states],
                         [1000, 1001, 1002])
        # series_offsets is 24 bytes: below the threshold, parsed normally.
        self.assertIsInstance(reply.series_offsets, pb.Tensor)
        self.assertEqual(list(from_tensor(reply.series_offsets)), [0, 1, 4096])

    def test_small_reply_is_the_parsed_message(self):
        response, _ = big_response(rows=4)
        reply = DESERIALIZE(response.SerializeToString())
        self.assertIsInstance(reply, pb.EncodeObservationsResponse)
        self.assertEqual(reply, response)

    def test_tensor_given_twice_is_merged_as_protobuf_merges(self):
        first, _ = big_response(rows=4096)
        second, _ = big_response(rows=8192, series=1)
        wire = first.SerializeToString() + second.SerializeToString()
        expected = pb.EncodeObservationsResponse.FromString(wire)
        reply = DESERIALIZE(wire)
        self.assertIsInstance(reply, pb.EncodeObservationsResponse)
        self.assertEqual(reply, expected)
        # Merged: shapes concatenate, the later data wins.
        self.assertEqual(list(reply.features.shape), [4096, 21, 8192, 21])

    def test_tensor_data_given_twice_is_merged_as_protobuf_merges(self):
        response, _ = big_response()
        tensor = response.features
        extra = pb.Tensor(data=b"\x01\x02\x03\x04" * 20000).SerializeToString()
        inner = tensor.SerializeToString() + extra
        # Field 1 (features), wire type 2, then the length as a varint.
        wire = bytes([0x0A]) + _varint(len(inner)) + inner
        expected = pb.EncodeObservationsResponse.FromString(wire)
        reply = DESERIALIZE(wire)
        self.assertEqual(reply, expected)
        self.assertEqual(reply.features.data, b"\x01\x02\x03\x04" * 20000)

    def test_truncated_reply_raises_as_protobuf_raises(self):
        wire = big_response()[0].SerializeToString()
        for cut in (len(wire) - 1, len(wire) // 2, 3):
            with self.assertRaises(protobuf_message.DecodeError):
                pb.EncodeObservationsResponse.FromString(wire[:cut])
            with self.assertRaises(protobuf_message.DecodeError):
                DESERIALIZE(wire[:cut])

    def test_unknown_fields_are_kept(self):
        response, features = big_response()
        # Field 99, varint 7: unknown to this schema.
        wire = response.SerializeToString() + _varint(99 << 3) + b"\x07"
        reply = DESERIALIZE(wire)
        self.assertIsInstance(reply, _wire.Reply)
        np.testing.assert_array_equal(from_tensor(reply.features), features)
        self.assertEqual(reply.ByteSize(), len(wire))


class OutgoingOnMessages(unittest.TestCase):

    def test_appended_tensors_parse_to_the_message_holding_them(self):
        rng = np.random.default_rng(3)
        times = np.cumsum(rng.integers(1, 10**9, 50000)).astype(np.int64)
        values = rng.standard_normal((50000, 3))
        query = rng.standard_normal((300, 4, 64)).astype(np.float32)
        def observations_fields(request):
            request.output_dtype = pb.FLOAT32
            request.observations.channel_names.extend(["a", "b", "c"])

        def rope_fields(request):
            request.positions.range.count = 300

        def positions_fields(request):
            request.output_dtype = pb.BFLOAT16

        cases = [
            (pb.EncodeObservationsRequest, observations_fields, [
                ("observations.timestamps", times, "int64"),
                ("observations.values", values, "float64"),
                ("observations.mask", np.isnan(values), "uint8"),
                ("observations.content", values[:, :2], "bfloat16")]),
            (pb.ApplyRopeRequest, rope_fields, [("query", query, "float32"),
                                   ("key", query[:, :1], "float16")]),
            (pb.EncodePositionsRequest, positions_fields, [
                ("content", np.zeros((0, 64), np.float32), "float32")]),
        ]
        for message_class, fields, tensors in cases:
            with self.subTest(message_class.__name__):
                expected = message_class()
                fields(expected)
                outgoing = _wire.Outgoing(message_class())
                fields(outgoing.message)
                for path, array, dtype in tensors:
                    *outer, name = path.split(".")
                    holder = expected
                    for field in outer:
                        holder = getattr(holder, field)
                    getattr(holder, name).CopyFrom(to_tensor(array, dtype))
                    outgoing.attach(path, *_wired(array, dtype))
                wire = _wire.serialize(outgoing)
                self.assertEqual(len(wire), outgoing.ByteSize())
                self.assertEqual(message_class.FromString(wire), expected)
                # Reads like the message.
                self.assertEqual(outgoing.ListFields(),
                                 outgoing.message.ListFields())

    def test_attach_refuses_a_field_already_set(self):
        request = pb.EncodeObservationsRequest()
        request.observations.timestamps.CopyFrom(
            to_tensor(np.arange(3, dtype=np.int64)))
        outgoing = _wire.Outgoing(request)
        with self.assertRaises(ValueError):
            outgoing.attach("observations.timestamps",
                            *_wired(np.arange(3), "int64"))
        # A sibling of a set field is fine.
        outgoing.attach("observations.values", *_wired(np.ones(3), "float64"))

    def test_small_arrays_go_into_the_message(self):
        outgoing = _wire.Outgoing(pb.EncodeObservationsRequest())
        attach(outgoing, "observations.timestamps",
               np.arange(10, dtype=np.int64), "int64")
        attach(outgoing, "observations.values", np.ones((10000, 2)),
               "float64")
        self.assertTrue(outgoing.message.observations.HasField("timestamps"))
        self.assertFalse(outgoing.message.observations.HasField("values"))
        parsed = pb.EncodeObservationsRequest.FromString(
            outgoing.SerializeToString())
        np.testing.assert_array_equal(from_tensor(parsed.observations.values),
                                      np.ones((10000, 2)))
        np.testing.assert_array_equal(
            from_tensor(parsed.observations.timestamps), np.arange(10))


def _wired(array, dtype):
    """attach()'s (shape, dtype, data) for `array` as to_tensor sends it."""
    tensor = to_tensor(array, dtype)
    return list(tensor.shape), tensor.dtype, tensor.data


def owner(array):
    """The object at the root of a numpy array's chain of views."""
    while isinstance(array, np.ndarray):
        array = array.base
    return array


def _varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


class DetachAgainstServer(harness.ServerTestCase):
    CLIENT_DEADLINE_SECONDS = 60

    def both(self, call):
        """call() with detaching off, then on: (copied, detached)."""
        saved = _wire.DETACH_BYTES
        _wire.DETACH_BYTES = 1 << 62
        try:
            copied = call()
        finally:
            _wire.DETACH_BYTES = saved
        return copied, call()

    def assert_same_bytes(self, copied, detached):
        self.assertEqual(copied.dtype, detached.dtype)
        self.assertEqual(copied.shape, detached.shape)
        self.assertEqual(copied.tobytes(), detached.tobytes())

    def test_every_tensor_reply_is_the_same_detached(self):
        rng = np.random.default_rng(7)
        query = rng.standard_normal((512, 8, 64), dtype=np.float32)
        key = rng.standard_normal((512, 2, 64), dtype=np.float32)
        embeddings = rng.standard_normal((2048, 64), dtype=np.float32)
        event_times = (1704067200 * 10**9 + np.cumsum(
            rng.integers(1, 10**11, 30000))).astype(np.int64)
        event_channels = rng.integers(0, 3, 30000).astype(np.int32)
        event_values = rng.standard_normal(30000)
        cases = {
            "encode_positions": lambda: [
                self.client.encode_positions(count=2048, dim=256)],
            "encode_positions_content": lambda: [
                self.client.encode_positions(count=2048, dim=64,
                                             content=embeddings)],
            "encode_events": lambda: [self.client.encode_events(
                event_times, event_channels, event_values,
                spec=OBSERVATIONS_SPEC).features],
            "apply_rope": lambda: list(self.client.apply_rope(
                query, key, rotary_dim=64)[:2]),
            "rope_tables": lambda: list(self.client.rope_tables(
                count=4096, rotary_dim=64)[:2]),
            "alibi": lambda: list(self.client.alibi(8, 128, 128)),
            "relative_bias": lambda: [self.client.relative_bias(
                q_len=256, k_len=256).bucket_ids],
        }
        for name, call in cases.items():
            with self.subTest(name):
                copied, detached = self.both(call)
                for a, b in zip(copied, detached):
                    self.assert_same_bytes(a, b)
                # The largest result is a view of the reply, not a copy.
                largest = max(detached, key=lambda a: a.nbytes)
                self.assertIsInstance(owner(largest), memoryview, name)

    def test_observations_unary_panel_and_stream_are_the_same_detached(self):
        rows = 20000
        times = (1704067200 * 10**9
                 + np.cumsum(np.full(rows, 90 * 10**9, dtype=np.int64)))
        values = np.sin(np.arange(rows * 3, dtype=np.float64)).reshape(rows, 3)
        values[::7, 1] = np.nan
        offsets = np.array([0, 5000, 5001, 12000, rows], dtype=np.int64)

        def unary():
            return self.client.encode_observations(
                times, values, spec=OBSERVATIONS_SPEC)

        def panel():
            return self.client.encode_panel(
                times, values, series_offsets=offsets, spec=OBSERVATIONS_SPEC)

        def stream():
            chunks = ((times[i:i + 8000], values[i:i + 8000])
                      for i in range(0, rows, 8000))
            return list(self.client.encode_observations_stream(
                chunks, spec=OBSERVATIONS_SPEC))

        copied, detached = self.both(unary)
        self.assert_same_bytes(copied.features, detached.features)
        self.assertEqual(copied.schema, detached.schema)
        self.assertEqual(copied.state, detached.state)
        self.assertIsInstance(owner(detached.features), memoryview)

        copied, detached = self.both(panel)
        self.assert_same_bytes(copied.features, detached.features)
        self.assertEqual(list(copied.states), list(detached.states))
        self.assertEqual(list(copied.series_offsets),
                         list(detached.series_offsets))

        copied, detached = self.both(stream)
        self.assertEqual(len(copied), 3)
        for a, b in zip(copied, detached):
            self.assert_same_bytes(a.features, b.features)
            self.assertEqual(a.state, b.state)


if __name__ == "__main__":
    unittest.main()
