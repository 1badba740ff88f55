#!/usr/bin/python3
"""Every RPC's output bytes, pinned: a fixed set of requests through a real
phasor-server, each response hashed (SHA-256 of its serialized bytes) and
compared with tests/data/golden_outputs.json.

The requests are the fuzz seeds of tests/fuzz/gen_corpus.py (every RPC, the
profiles, panels and streams) plus a grid over what a restructuring of the
kernels could change without another test noticing: every output dtype of
every tensor-returning RPC, both RoPE layouts under every scaling, M-RoPE,
and the full temporal spec in each dtype. A change that moves any output
byte fails here with the names of the requests whose bytes moved.

When a change is meant to move bytes (a new default, a more exact kernel),
rewrite the file and say so in the commit:

    /usr/bin/python3 tests/e2e/test_golden_outputs.py --update
"""
import hashlib
import json
import os
import shutil
import sys
import tempfile
import unittest

import numpy as np

import harness

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
GOLDEN = os.path.join(ROOT, "tests", "data", "golden_outputs.json")
sys.path.insert(0, os.path.join(ROOT, "tests", "fuzz"))
import gen_corpus as seeds  # noqa: E402
from gen_corpus import tensor  # noqa: E402

# The fuzz targets' profiles (tests/fuzz/fuzz_util.cc), as a server file.
PROFILES = """
profile {
  name: "wpe"
  spec { positional { learned { table: "wpe" } } }
  learned_tables { name: "wpe" file { path: "table_5x4_f32.npy" } }
}
profile { name: "rope" spec { rope { rotary_dim: 4 base: 10000 } } }
profile {
  name: "shaw"
  spec { relative_bias { shaw { max_relative_position: 2 } table: "wpe" } }
}
profile {
  name: "vitals"
  spec {
    temporal {
      time { dim: 4 min_period_seconds: 60 max_period_seconds: 86400 }
      gaps {}
      calendar { time_zone: "Europe/Paris" fields: HOUR_OF_DAY fields: DAY_OF_WEEK }
    }
  }
  holiday_calendars { name: "demo" dates: "2024-12-25" dates: "2025-01-01" }
  time2vec {
    name: "t2v"
    omega { path: "table.safetensors" tensor: "other" }
    phi { path: "table.safetensors" tensor: "other" }
  }
}
"""

DTYPES = ["FLOAT32", "FLOAT16", "BFLOAT16", "FLOAT64"]
SCALINGS = {
    "none": "",
    "linear": "scaling { linear { factor: 2 } }",
    "ntk": "scaling { ntk { factor: 3 } }",
    "dynamic": "scaling { dynamic { factor: 2 } } max_position_embeddings: 64",
    "yarn": "scaling { yarn { factor: 4 original_max_position_embeddings: 32 } }",
    "longrope": "scaling { longrope { %s %s factor: 4 "
                "original_max_position_embeddings: 16 } }"
                % (" ".join("short_factor: %g" % (1 + 0.25 * i) for i in range(8)),
                   " ".join("long_factor: %g" % (2 + 0.5 * i) for i in range(8))),
    "llama3": "scaling { llama3 { factor: 8 original_max_position_embeddings: 16 } } "
              "base: 500000",
}


def _rng_values(n, seed):
    return np.random.default_rng(seed).uniform(-2, 2, n)


def grid():
    """[(name, method, [request text])] beyond the fuzz seeds."""
    cases = []
    positions = tensor("INT64", [5], [0, 1, 7, 4096, 1 << 31])
    for dtype in DTYPES:
        cases.append((f"positions/sinusoidal/{dtype}", "EncodePositions", [
            "positions { values %s } spec { positional { sinusoidal { dim: 32 } } } "
            "output_dtype: %s" % (positions, dtype)]))
        cases.append((f"positions/content/{dtype}", "EncodePositions", [
            "positions { range { start: 3 count: 4 } } spec { positional { sinusoidal "
            "{ dim: 8 layout: SPLIT_COS_SIN } } } content %s content_scale: 1.5 "
            "output_dtype: %s" % (tensor(dtype, [4, 8], _rng_values(32, 1)), dtype)]))
        cases.append((f"positions/learned/{dtype}", "EncodePositions", [
            'positions { range { count: 5 } } profile: "wpe" output_dtype: %s' % dtype]))
        for layout in ("HALF", "INTERLEAVED"):
            for scaling, text in SCALINGS.items():
                cases.append((f"rope/{dtype}/{layout}/{scaling}", "ApplyRope", [
                    "query %s key %s positions { values %s } spec { rope { "
                    "rotary_dim: 16 layout: %s %s } }"
                    % (tensor(dtype, [5, 2, 24], _rng_values(240, 2)),
                       tensor(dtype, [5, 1, 24], _rng_values(120, 3)),
                       tensor("INT64", [5], [0, 1, 31, 100, 70000]), layout, text)]))
        cases.append((f"rope/{dtype}/mrope", "ApplyRope", [
            "query %s positions { values %s } spec { rope { rotary_dim: 16 "
            "mrope_section: 2 mrope_section: 3 mrope_section: 3 } }"
            % (tensor(dtype, [3, 2, 16], _rng_values(96, 4)),
               tensor("INT64", [3, 3], [0, 1, 2, 0, 5, 9, 0, 7, 3]))]))
        cases.append((f"rope/{dtype}/mrope_interleaved", "ApplyRope", [
            "query %s positions { values %s } spec { rope { rotary_dim: 16 "
            "mrope_section: 4 mrope_section: 2 mrope_section: 2 mrope_interleaved: true } }"
            % (tensor(dtype, [3, 2, 16], _rng_values(96, 5)),
               tensor("INT64", [3, 3], [0, 1, 2, 0, 5, 9, 0, 7, 3]))]))
        cases.append((f"rope_tables/{dtype}", "RopeTables", [
            "positions { values %s } spec { rope { rotary_dim: 16 %s } } output_dtype: %s"
            % (positions, SCALINGS["yarn"], dtype)]))
        cases.append((f"alibi/{dtype}", "AlibiBias", [
            "num_heads: 12 q_len: 5 k_len: 7 causal: true output_dtype: %s" % dtype]))
        cases.append((f"relative_bias/t5/{dtype}", "RelativeBias", [
            "query_positions { range { count: 6 } } key_positions { range { start: -3 "
            "count: 9 } } spec { relative_bias { t5 { num_buckets: 16 max_distance: 40 } } } "
            "table %s include_bucket_ids: true output_dtype: %s"
            % (tensor("FLOAT32", [16, 3], _rng_values(48, 6)), dtype)]))
        cases.append((f"observations/full/{dtype}", "EncodeObservations", [
            "%s %s output_dtype: %s" % (seeds.WIDE, seeds.FULL_TEMPORAL, dtype)]))
        cases.append((f"observations/vitals/{dtype}", "EncodeObservations", [
            '%s profile: "vitals" output_dtype: %s' % (seeds.WIDE, dtype)]))
    return cases


def all_cases():
    cases = []
    for method, message_texts in (
            ("EncodePositions", seeds.ENCODE_POSITIONS),
            ("ApplyRope", seeds.APPLY_ROPE),
            ("RopeTables", seeds.ROPE_TABLES),
            ("AlibiBias", seeds.ALIBI_BIAS),
            ("RelativeBias", seeds.RELATIVE_BIAS),
            ("Describe", seeds.DESCRIBE),
            ("EncodeObservations", seeds.ENCODE_OBSERVATIONS)):
        for i, text in enumerate(message_texts):
            cases.append((f"seed/{method}/{i}", method, [text]))
    for i, chunks in enumerate(seeds.STREAMS):
        cases.append((f"seed/EncodeObservationsStream/{i}",
                      "EncodeObservationsStream", chunks))
    return cases + grid()


REQUEST_TYPES = {
    "EncodePositions": "EncodePositionsRequest",
    "ApplyRope": "ApplyRopeRequest",
    "RopeTables": "RopeTablesRequest",
    "AlibiBias": "AlibiBiasRequest",
    "RelativeBias": "RelativeBiasRequest",
    "Describe": "DescribeRequest",
    "EncodeObservations": "EncodeObservationsRequest",
    "EncodeObservationsStream": "EncodeObservationsRequest",
}


def encoded_cases():
    """[(name, method, [request bytes])]: one protoc call per text, so that a
    text protoc rejects names its case."""
    return [(name, method, [seeds.encode(REQUEST_TYPES[method], t) for t in texts])
            for name, method, texts in all_cases()]


def output_hashes(channel, cases):
    """{name: sha256 hex of the response bytes (each prefixed by its length
    for a stream), or of the status code and message for a refused call}."""
    import grpc
    identity = dict(request_serializer=None, response_deserializer=None)
    hashes = {}
    for name, method, requests in cases:
        path = "/phasor.v1.Encoder/" + method
        digest = hashlib.sha256()
        try:
            if method == "EncodeObservationsStream":
                call = channel.stream_stream(path, **identity)
                for response in call(iter(requests), timeout=60):
                    digest.update(len(response).to_bytes(8, "little"))
                    digest.update(response)
            else:
                digest.update(channel.unary_unary(path, **identity)(
                    requests[0], timeout=60))
        except grpc.RpcError as error:
            # A seed the server refuses: its status is its output.
            digest = hashlib.sha256(
                f"{error.code().name}: {error.details()}".encode())
            hashes[name] = error.code().name + " " + digest.hexdigest()
            continue
        hashes[name] = digest.hexdigest()
    return hashes


def run_server_and_hash(cases):
    import grpc
    directory = tempfile.mkdtemp(prefix="phasor-golden-")
    try:
        for table in ("table_5x4_f32.npy", "table.safetensors"):
            shutil.copy(os.path.join(ROOT, "tests", "data", table), directory)
        profiles = os.path.join(directory, "profiles.textproto")
        with open(profiles, "w") as f:
            f.write(PROFILES)
        with harness.Server([f"--profiles={profiles}"], metrics=False) as server:
            with grpc.insecure_channel(
                    f"{harness.LOOPBACK}:{server.port}",
                    options=[("grpc.max_receive_message_length", 64 << 20)]) as channel:
                return output_hashes(channel, cases)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


class GoldenOutputsTest(unittest.TestCase):
    def test_every_output_byte_is_unchanged(self):
        with open(GOLDEN) as f:
            expected = json.load(f)
        actual = run_server_and_hash(encoded_cases())
        self.assertEqual(sorted(actual), sorted(expected),
                         "the set of cases differs from the golden file: "
                         "rerun with --update if the change is deliberate")
        moved = [name for name in expected if actual[name] != expected[name]]
        self.assertEqual(moved, [], f"{len(moved)} of {len(expected)} outputs "
                         "changed bytes")
        # The grid does reach every dtype of every tensor RPC.
        for method in ("positions/sinusoidal", "rope", "rope_tables", "alibi",
                       "relative_bias/t5", "observations/full"):
            for dtype in DTYPES:
                self.assertTrue(any(n.startswith(f"{method}/{dtype}") for n in actual),
                                f"{method} {dtype}")


def main():
    if "--update" in sys.argv:
        hashes = run_server_and_hash(encoded_cases())
        with open(GOLDEN, "w") as f:
            json.dump(hashes, f, indent=1, sort_keys=True)
            f.write("\n")
        print(f"wrote {len(hashes)} hashes to {GOLDEN}")
        return
    unittest.main()


if __name__ == "__main__":
    main()
