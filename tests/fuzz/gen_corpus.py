#!/usr/bin/python3
"""Writes the fuzz targets' seed corpora, tests/fuzz/corpus/<target>/.

Run from anywhere with Debian's interpreter (numpy is python3-numpy):

    /usr/bin/python3 tests/fuzz/gen_corpus.py

Request seeds are written in protobuf text format here and encoded with
`protoc --encode` against proto/phasor/v1/encoder.proto, so they are valid
requests for the API as it stands; each is small (well under 1 KiB) and
valid, so the fuzzer starts from the paths real calls take. Profile names
("wpe", "rope", "vitals", "t2v", "demo") are those of tests/fuzz/fuzz_util.cc.
The script replaces the whole corpus directory; the files are checked in.
"""
import io
import json
import os
import shutil
import struct
import subprocess

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(HERE, "corpus")
# EncodeObservationsStream chunks are joined by this (fuzz_observation_stream.cc).
CHUNK_SEPARATOR = b"\n--chunk--\n"

FORMATS = {"FLOAT32": "<f4", "FLOAT16": "<f2", "FLOAT64": "<f8",
           "INT64": "<i8", "INT32": "<i4", "UINT8": "<u1", "BOOL": "<u1"}


def text_bytes(data):
    """A protobuf text-format bytes literal."""
    return '"' + "".join("\\%03o" % b for b in data) + '"'


def tensor(dtype, shape, values):
    if dtype == "BFLOAT16":
        f32 = np.asarray(values, dtype="<f4").reshape(-1).view("<u4")
        data = (f32 >> 16).astype("<u2").tobytes()
    else:
        data = np.asarray(values, dtype=FORMATS[dtype]).tobytes()
    dims = " ".join("shape: %d" % d for d in shape)
    return "{ %s dtype: %s data: %s }" % (dims, dtype, text_bytes(data))


def encode(message, text):
    return subprocess.run(
        ["protoc", "--encode=phasor.v1." + message,
         "--proto_path=" + os.path.join(ROOT, "proto"),
         os.path.join(ROOT, "proto", "phasor", "v1", "encoder.proto")],
        input=text.encode(), check=True, capture_output=True).stdout


def write(target, seeds):
    directory = os.path.join(CORPUS, target)
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    for i, data in enumerate(seeds):
        with open(os.path.join(directory, "seed-%02d" % i), "wb") as f:
            f.write(data)


NS = 1_000_000_000
# 2026-03-08 06:00 UTC: an hour before New York springs forward.
DST_EVE = 1_772_949_600 * NS

ENCODE_POSITIONS = [
    "positions { range { start: 0 count: 8 } } spec { positional { sinusoidal { dim: 16 } } }",
    "positions { values %s } spec { positional { sinusoidal { dim: 8 layout: SPLIT_SIN_COS "
    "frequencies: TENSOR2TENSOR } } } content %s content_scale: 2.8284 output_dtype: FLOAT16"
    % (tensor("INT64", [3], [0, 1, 1 << 40]), tensor("FLOAT32", [3, 8], range(24))),
    "positions { values %s } spec { positional { sinusoidal { dim: 4 base: 500 "
    "layout: SPLIT_COS_SIN } } } output_dtype: BFLOAT16"
    % tensor("FLOAT64", [2], [0.5, -3.25]),
    'positions { range { start: 1 count: 4 } } profile: "wpe"',
    'positions { range { start: -6 count: 3 step: 3 } } profile: "wpe" content %s'
    % tensor("BFLOAT16", [3, 4], range(12)),
]

APPLY_ROPE = [
    "query %s positions { range { count: 2 } } spec { rope { rotary_dim: 4 } }"
    % tensor("FLOAT32", [2, 2, 4], np.linspace(-1, 1, 16)),
    "query %s key %s positions { values %s } spec { rope { rotary_dim: 4 layout: INTERLEAVED "
    "scaling { yarn { factor: 4 original_max_position_embeddings: 16 } } } }"
    % (tensor("FLOAT16", [2, 2, 6], np.linspace(-2, 2, 24)),
       tensor("FLOAT16", [2, 1, 6], np.linspace(0, 1, 12)),
       tensor("FLOAT64", [2], [0.0, 1.5])),
    'query %s key %s positions { range { start: 100 count: 1 } } profile: "rope"'
    % (tensor("BFLOAT16", [1, 4, 4], range(16)), tensor("BFLOAT16", [1, 2, 4], range(8))),
    "query %s positions { values %s } spec { rope { rotary_dim: 8 base: 500000 "
    "scaling { llama3 { factor: 8 original_max_position_embeddings: 8 } } "
    "max_position_embeddings: 64 } }"
    % (tensor("FLOAT32", [3, 1, 8], range(24)), tensor("INT64", [3], [0, 7, 63])),
    "query %s positions { range { count: 2 } } spec { rope { rotary_dim: 4 "
    "scaling { longrope { short_factor: 1 short_factor: 2 long_factor: 3 long_factor: 4 "
    "factor: 4 original_max_position_embeddings: 1 } } fold_attention_factor: false } }"
    % tensor("FLOAT32", [2, 1, 4], range(8)),
]

ROPE_TABLES = [
    "positions { range { count: 4 } } spec { rope { rotary_dim: 8 } }",
    'positions { range { start: 5 count: 3 step: 2 } } profile: "rope" output_dtype: FLOAT16',
    "positions { values %s } spec { rope { rotary_dim: 4 scaling { dynamic { factor: 2 } } "
    "max_position_embeddings: 4 seq_len: 12 } } output_dtype: BFLOAT16"
    % tensor("FLOAT64", [2], [0.25, 11.0]),
    "positions { range { count: 2 } } spec { rope { rotary_dim: 6 base: 1000 "
    "scaling { ntk { factor: 3 } } } }",
    "positions { range { count: 2 } } spec { rope { rotary_dim: 4 "
    "scaling { linear { factor: 2 } } } }",
]

ALIBI_BIAS = [
    "num_heads: 8 q_len: 4 k_len: 4 causal: true",
    "num_heads: 6 q_len: 2 k_len: 5",
    "num_heads: 12",
    "num_heads: 3 q_len: 1 k_len: 3 causal: true output_dtype: FLOAT16",
]

RELATIVE_BIAS = [
    "query_positions { range { start: 5 count: 3 } } key_positions { range { count: 8 } } "
    "spec { relative_bias { t5 { num_buckets: 8 max_distance: 20 } } } "
    "table " + tensor("FLOAT32", [8, 2], list(range(16))) + " include_bucket_ids: true",
    "query_positions { values " + tensor("INT64", [3], [0, -9223372036854775808, 9]) + " } "
    "key_positions { range { start: -4 count: 6 step: 3 } } "
    "spec { relative_bias { t5 { num_buckets: 33 direction: CAUSAL } } }",
    "query_positions { range { count: 4 } } key_positions { range { count: 4 } } "
    'profile: "shaw" output_dtype: BFLOAT16',
    "query_positions { values " + tensor("INT64", [2], [0, 1500000000]) + " } "
    "key_positions { values " + tensor("INT64", [3], [0, 1000000000, 9000000000000]) + " } "
    "spec { relative_bias { time_buckets { num_buckets: 16 exact_seconds: 2 "
    "max_seconds: 3600 } } }",
    "query_positions { values " + tensor("INT64", [2], [0, 1500000000]) + " } "
    "key_positions { values " + tensor("INT64", [2], [0, 60000000000]) + " } "
    "spec { relative_bias { time_alibi { num_heads: 3 unit_seconds: 60 causal: true } } } "
    "output_dtype: FLOAT64",
]

DESCRIBE = [
    "spec { positional { sinusoidal { dim: 16 } } }",
    "spec { rope { rotary_dim: 8 base: 500000 } } num_offsets: 16",
    "spec { temporal { time { dim: 6 min_period_seconds: 1 max_period_seconds: 3600 } } } "
    "num_offsets: 8 offset_step: 0.5",
    'profile: "vitals"',
    'profile: "rope" num_offsets: 2',
    "spec { relative_bias { t5 { num_buckets: 32 max_distance: 128 } } }",
    "spec { relative_bias { time_buckets { num_buckets: 8 exact_seconds: 1 "
    "max_seconds: 86400 direction: CAUSAL } } }",
]

FULL_TEMPORAL = (
    "spec { temporal { content {} time { dim: 4 min_period_seconds: 60 "
    "max_period_seconds: 86400 origin: UNIX_EPOCH } "
    'time2vec { parameters: "t2v" } '
    "gaps { first_observation: FLAG transform: LOG1P include_mask: true "
    "include_last_value: true } "
    'calendar { time_zone: "America/New_York" fields: HOUR_OF_DAY fields: DAY_OF_WEEK '
    "fields: WEEK_OF_YEAR fractional: true include_utc_offset: true include_dst: true "
    'holidays { dates: "2026-03-09" kernel: EXPONENTIAL alpha: 0.5 } } } }')

WIDE = "observations { timestamps %s values %s }" % (
    tensor("INT64", [4], [DST_EVE + i * 1800 * NS for i in range(4)]),
    tensor("FLOAT32", [4, 2], [1, float("nan"), 2, 3, float("nan"), 4, 5, 6]))

ENCODE_OBSERVATIONS = [
    WIDE + " " + FULL_TEMPORAL,
    "observations { event_times %s event_channels %s event_values %s num_channels: 3 } "
    "spec { temporal { gaps { first_observation: SINCE_ORIGIN transform: SINUSOIDAL "
    "sinusoidal_dim: 4 sinusoidal_min_period_seconds: 1 sinusoidal_max_period_seconds: 100 } } }"
    % (tensor("INT64", [3], [0, NS, 5 * NS]), tensor("INT32", [3], [0, 2, 0]),
       tensor("FLOAT64", [3], [1.5, -1, 2])),
    WIDE + ' profile: "vitals" output_dtype: FLOAT16',
    "observations { timestamps %s content %s } spec { temporal { content { scale: 2 } "
    "time { dim: 8 min_period_seconds: 1 max_period_seconds: 1000 } "
    'calendar { fields: MONTH_OF_YEAR fields: QUARTER } combine: SUM d_model: 8 } }'
    % (tensor("INT64", [2], [0, 86400 * NS]), tensor("FLOAT32", [2, 8], range(16))),
    "observations { timestamps %s values %s } spec { temporal { gaps {} } } "
    "state { last_timestamp_ns: %d first_timestamp_ns: 0 channels { last_seen_ns: %d "
    "last_value: 7 } }"
    % (tensor("INT64", [1], [10 * NS]), tensor("FLOAT32", [1, 1], [8]), 9 * NS, 9 * NS),
    # A panel of three series (one empty) in two zones, the last continuing.
    "observations { timestamps %s values %s series_offsets %s "
    'time_zones: "America/New_York" time_zones: "Asia/Kathmandu" time_zone_index %s } '
    "spec { temporal { time { dim: 4 } gaps { include_mask: true } "
    'calendar { fields: HOUR_OF_DAY include_utc_offset: true } } } '
    "states {} states {} states { last_timestamp_ns: %d first_timestamp_ns: 0 "
    "channels {} channels { last_seen_ns: %d last_value: 2 } }"
    % (tensor("INT64", [5], [DST_EVE, DST_EVE + 60 * NS, 6 * NS, 10 * NS, 10 * NS]),
       tensor("FLOAT32", [5, 2], [1, float("nan"), 2, 3, 4, 5, float("nan"), 6, 7, 8]),
       tensor("INT64", [4], [0, 2, 2, 5]), tensor("INT32", [3], [0, 1, 1]), 5 * NS, 5 * NS),
    # A long-layout panel whose series share one zone.
    "observations { event_times %s event_channels %s event_values %s num_channels: 2 "
    'series_offsets %s time_zones: "Europe/Berlin" } '
    'spec { temporal { gaps {} calendar { fields: DAY_OF_WEEK } } }'
    % (tensor("INT64", [4], [0, NS, 0, 3 * NS]), tensor("INT32", [4], [0, 1, 1, 0]),
       tensor("FLOAT64", [4], [1, 2, 3, 4]), tensor("INT64", [3], [0, 2, 4])),
    # Explicit time periods with harmonics; years, flags, Fourier orders.
    "observations { timestamps %s } spec { temporal { time { origin: UNIX_EPOCH "
    "periods { period_seconds: 31557600 order: 10 } periods { period_seconds: 604800 "
    "order: 3 } } calendar { time_zone: \"Europe/Berlin\" fields: YEAR fields: ISO_YEAR "
    "fields: IS_WEEKEND fields: IS_QUARTER_END fields: DAY_OF_YEAR fields: HOUR_OF_DAY "
    "fourier_orders: 0 fourier_orders: 0 fourier_orders: 0 fourier_orders: 0 "
    "fourier_orders: 10 fourier_orders: 4 min_year: 1990 max_year: 2040 } } }"
    % tensor("INT64", [3], [0, 86400 * NS, 400 * 86400 * NS]),
]

STREAM_CHUNK = "observations { timestamps %s values %s }"
STREAMS = [
    [WIDE + " " + FULL_TEMPORAL,
     STREAM_CHUNK % (tensor("INT64", [2], [DST_EVE + 7200 * NS, DST_EVE + 9000 * NS]),
                     tensor("FLOAT32", [2, 2], [7, float("nan"), 8, 9]))],
    [STREAM_CHUNK % (tensor("INT64", [1], [0]), tensor("FLOAT32", [1, 1], [1]))
     + ' profile: "vitals"',
     STREAM_CHUNK % (tensor("INT64", [1], [NS]), tensor("FLOAT32", [1, 1], [2])),
     STREAM_CHUNK % (tensor("INT64", [2], [2 * NS, 3 * NS]),
                     tensor("FLOAT32", [2, 1], [3, 4]))],
    ["observations { event_times %s event_channels %s event_values %s num_channels: 2 } "
     "spec { temporal { gaps { include_mask: true } } }"
     % (tensor("INT64", [2], [0, NS]), tensor("INT32", [2], [0, 1]),
        tensor("FLOAT32", [2], [1, 2])),
     "observations { event_times %s event_channels %s event_values %s num_channels: 2 }"
     % (tensor("INT64", [1], [2 * NS]), tensor("INT32", [1], [1]),
        tensor("FLOAT32", [1], [3]))],
    # A panel stream: two series, two messages.
    ["observations { timestamps %s values %s series_offsets %s } "
     "spec { temporal { gaps { include_last_value: true } } }"
     % (tensor("INT64", [3], [0, NS, 0]), tensor("FLOAT32", [3, 1], [1, 2, 3]),
        tensor("INT64", [3], [0, 2, 3])),
     "observations { timestamps %s values %s series_offsets %s }"
     % (tensor("INT64", [2], [2 * NS, 2 * NS]), tensor("FLOAT32", [2, 1], [4, 5]),
        tensor("INT64", [3], [0, 1, 2]))],
]


# ModelInfer (fuzz_model_infer.cc): Open Inference Protocol requests for the
# fuzzers' profiles, one model of each kind; raw contents, typed contents,
# BYTES inputs (names, serialized states) and parameters.
def oip_input(name, datatype, shape, contents=""):
    dims = " ".join("shape: %d" % d for d in shape)
    return 'inputs { name: "%s" datatype: "%s" %s %s }' % (name, datatype, dims, contents)


def oip_raw(dtype, values):
    """raw_input_contents for phasor.v1 `dtype` values (tensor()'s bytes)."""
    if dtype == "BFLOAT16":
        f32 = np.asarray(values, dtype="<f4").reshape(-1).view("<u4")
        data = (f32 >> 16).astype("<u2").tobytes()
    else:
        data = np.asarray(values, dtype=FORMATS[dtype]).tobytes()
    return "raw_input_contents: " + text_bytes(data)


def oip_bytes(elements):
    """BYTES raw contents: each element after its 4-byte little-endian length."""
    data = b"".join(struct.pack("<I", len(e)) + e for e in elements)
    return "raw_input_contents: " + text_bytes(data)


def oip_parameter(key, kind, value):
    return 'parameters { key: "%s" value { %s: %s } }' % (key, kind, value)


MODEL_INFER = [
    " ".join(['model_name: "wpe"',
              oip_input("positions", "INT64", [3]), oip_input("content", "FP16", [3, 4]),
              oip_raw("INT64", [0, 1, 4]), oip_raw("FLOAT16", np.linspace(-1, 1, 12)),
              oip_parameter("output_dtype", "string_param", '"BF16"'),
              oip_parameter("content_scale", "double_param", "2")]),
    " ".join(['model_name: "rope" model_version: "1" id: "seed"',
              oip_input("query", "FP16", [2, 2, 4]), oip_input("key", "FP16", [2, 1, 4]),
              oip_input("positions", "INT64", [2]),
              oip_raw("FLOAT16", np.linspace(-2, 2, 16)), oip_raw("FLOAT16", range(8)),
              oip_raw("INT64", [5, 1 << 40])]),
    " ".join(['model_name: "rope"',
              oip_input("query", "FP32", [1, 1, 4],
                        "contents { fp32_contents: [0.5, -1, 2, 3] }"),
              oip_input("positions", "FP64", [1], "contents { fp64_contents: 7.25 }"),
              oip_parameter("tensor_layout", "string_param", '"TOKENS_HEADS_DIM"'),
              'outputs { name: "query" }']),
    " ".join(['model_name: "shaw"',
              oip_input("query_positions", "INT64", [3]),
              oip_input("key_positions", "INT64", [4]),
              oip_raw("INT64", [0, 5, -3]), oip_raw("INT64", [0, 1, 2, 9]),
              oip_parameter("include_bucket_ids", "bool_param", "true"),
              oip_parameter("output_dtype", "string_param", '"FP64"')]),
    " ".join(['model_name: "vitals"',
              oip_input("timestamps", "INT64", [4]), oip_input("values", "FP32", [4, 2]),
              oip_input("mask", "BOOL", [4, 2]), oip_input("channel_names", "BYTES", [2]),
              oip_raw("INT64", [DST_EVE + i * 1800 * NS for i in range(4)]),
              oip_raw("FLOAT32", [1, float("nan"), 2, 3, float("nan"), 4, 5, 6]),
              oip_raw("BOOL", [1, 0, 1, 1, 0, 1, 1, 1]),
              oip_bytes([b"hr", b"spo2"])]),
    " ".join(['model_name: "vitals"',
              oip_input("event_times", "INT64", [3]), oip_input("event_channels", "INT32", [3]),
              oip_input("event_values", "FP64", [3]), oip_input("series_offsets", "INT64", [3]),
              oip_input("states", "BYTES", [2]),
              oip_raw("INT64", [DST_EVE, DST_EVE + NS, DST_EVE]), oip_raw("INT32", [0, 1, 2]),
              oip_raw("FLOAT64", [0.5, -1, 3]), oip_raw("INT64", [0, 2, 3]),
              oip_bytes([b"", b""]),
              oip_parameter("num_channels", "int64_param", "3")]),
    " ".join(['model_name: "vitals"',
              oip_input("timestamps", "FP64", [2], "contents { fp64_contents: [1.7e9, 1.7e9] }"),
              oip_input("state", "BYTES", [1], 'contents { bytes_contents: "" }'),
              oip_parameter("output_dtype", "string_param", '"FP16"')]),
]


def encode_inference(text):
    return subprocess.run(
        ["protoc", "--encode=inference.ModelInferRequest",
         "--proto_path=" + os.path.join(ROOT, "proto"),
         os.path.join(ROOT, "proto", "inference", "grpc_service.proto")],
        input=text.encode(), check=True, capture_output=True).stdout


def npy_seeds():
    seeds = []
    for array in (np.arange(20, dtype="<f4").reshape(5, 4) / 10,
                  np.array([1.5, -2.5, 3.0], dtype="<f8"),
                  np.array(0.5, dtype="<f2"),
                  np.arange(6, dtype="<i8").reshape(2, 3),
                  np.array([True, False]),
                  np.zeros((0, 3), dtype="<i4")):
        f = io.BytesIO()
        np.save(f, array)
        seeds.append(f.getvalue())
    # Version 2.0 (4-byte header length), written by hand as numpy does for
    # headers over 64 KiB.
    header = b"{'descr': '|u1', 'fortran_order': False, 'shape': (4,), }"
    header += b" " * (-(12 + len(header) + 1) % 64) + b"\n"
    seeds.append(b"\x93NUMPY\x02\x00" + struct.pack("<I", len(header)) + header
                 + bytes([1, 2, 3, 4]))
    return seeds


def safetensors(tensors, metadata=None):
    header, buffer = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(buffer), len(buffer) + len(data)]}
        buffer += data
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + buffer


def safetensors_seeds():
    wpe = (np.arange(20, dtype="<f4") / 10).tobytes()
    with open(os.path.join(ROOT, "tests", "data", "table.safetensors"), "rb") as f:
        checked_in = f.read()
    return [
        checked_in,
        safetensors({"wpe": ("F32", [5, 4], wpe)}),
        safetensors({"wpe": ("F16", [2], np.array([1, -2], "<f2").tobytes())},
                    {"format": "pt"}),
        safetensors({"a": ("BF16", [1, 2], b"\x80\x3f\x00\x40"),
                     "wpe": ("F64", [1], np.array([3.5], "<f8").tobytes()),
                     "empty": ("F32", [0, 4], b"")}),
    ]


def timestamp_seeds():
    seconds = [
        [0.0, 1.5, 1_772_949_600.25],
        [-2_208_988_800.0, 7_258_118_400.0],   # 1900-01-01, 2200-01-01.
        [float("nan"), float("inf"), -1e300],
        [9_223_372_036.854775, -9_223_372_036.854775],
    ]
    ns = [
        [DST_EVE + i * 1800 * NS for i in range(6)],
        [-(1 << 63), -(1 << 63) + 1, (1 << 63) - 1],
        [1_761_458_400 * NS, 1_761_462_000 * NS],   # New York falls back, 2025-10-26.
    ]
    return ([struct.pack("<%dd" % len(s), *s) for s in seconds]
            + [struct.pack("<%dq" % len(n), *n) for n in ns])


# phasor-client's panel tables: an options byte (fuzz_panel_csv.cc: layout
# = b % 3, time unit = (b // 3) % 5, 0x40 a "zone" column, 0x80 fixed channel
# names hr, spo2), then the file.
PANEL_CSV = [
    (0, "series,time,hr,spo2\na,2024-01-01T00:00:00Z,61,98\nb,2024-01-01T00:00:00Z,,97\n"
        "a,2024-01-01T00:01:00.5+01:00,62,NA\n"),
    (1 + 3 * 1, "series,time,channel,value\n\"icu, 1\",1704096000,hr,60\n"
        "\"icu, 1\",1704096060.25,spo2,nan\n"),
    (2 + 3 * 4 + 0x40, "series,time,zone,hr\r\nx,1704067200000000000,Europe/Berlin,1\r\n"
        "y,1704067200000000001,Asia/Kathmandu,2\r\n"),
    (1 + 0x80, "series,time,channel,value\ns,2024-01-01,spo2,95\ns,2024-01-02,hr,70\n"),
    (0, "series,time,hr\na,1704096000,1\n"),  # seconds without a unit: refused
]

TIME_ZONES = ["UTC", "America/New_York", "Europe/Paris", "Asia/Kolkata",
              "Australia/Lord_Howe", "Etc/GMT+5", "", "Mars/Base", "../../etc/passwd",
              "America/Argentina/Buenos_Aires"]


def main():
    proto = {
        "encode_positions": ("EncodePositionsRequest", ENCODE_POSITIONS),
        "apply_rope": ("ApplyRopeRequest", APPLY_ROPE),
        "rope_tables": ("RopeTablesRequest", ROPE_TABLES),
        "alibi_bias": ("AlibiBiasRequest", ALIBI_BIAS),
        "relative_bias": ("RelativeBiasRequest", RELATIVE_BIAS),
        "describe": ("DescribeRequest", DESCRIBE),
        "encode_observations": ("EncodeObservationsRequest", ENCODE_OBSERVATIONS),
    }
    for target, (message, texts) in proto.items():
        write(target, [encode(message, t) for t in texts])
    write("observation_stream",
          [CHUNK_SEPARATOR.join(encode("EncodeObservationsRequest", c) for c in chunks)
           for chunks in STREAMS])
    write("npy", npy_seeds())
    write("safetensors", safetensors_seeds())
    write("timestamps", timestamp_seeds())
    write("time_zone", [z.encode() for z in TIME_ZONES])
    write("model_infer", [encode_inference(t) for t in MODEL_INFER])
    write("panel_csv", [bytes([options]) + text.encode() for options, text in PANEL_CSV])


if __name__ == "__main__":
    main()
