"""phasor-client against a real phasor-server: every RPC, numbers checked
against the formulas in reference.py, .npy and CSV in and out."""

import os
import tempfile
import unittest

import numpy as np

import harness
import reference

# The accuracy contract: float32 outputs within 2e-6 of an exact reference
# (docs/API.md, "Precision of positional angles").
FLOAT32_TOLERANCE = 2e-6


class ClientCliTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = cls.tmp.name
        table = np.arange(12, dtype=np.float32).reshape(6, 2) / 4
        np.save(cls.path("tiny_table.npy"), table)
        cls.learned_table = table
        with open(cls.path("profiles.textproto"), "w") as f:
            f.write(f"""
profile {{
  name: "tiny-learned"
  description: "a 6 x 2 learned table"
  spec {{ positional {{ learned {{ table: "tiny" }} }} }}
  learned_tables {{ name: "tiny" file {{ path: "{cls.path('tiny_table.npy')}" }} }}
}}
profile {{
  name: "sin16"
  description: "16-wide sinusoids"
  spec {{ positional {{ sinusoidal {{ dim: 16 }} }} }}
}}
""")
        cls.server = harness.Server(
            ["--profiles", cls.path("profiles.textproto")]).start()

    @classmethod
    def tearDownClass(cls):
        cls.server.__exit__(None, None, None)
        cls.tmp.cleanup()

    @classmethod
    def path(cls, name):
        return os.path.join(cls.dir, name)

    def call(self, *args):
        result = harness.run_client("--target", self.server.target, *args)
        self.assertEqual(result.returncode, 0,
                         f"phasor-client {' '.join(map(str, args))}\n"
                         f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}")
        return result

    def test_encode_positions_npy_matches_formula(self):
        out = self.path("pe.npy")
        self.call("encode-positions", "--count", 50, "--dim", 16, "--out", out)
        pe = np.load(out)
        self.assertEqual(pe.dtype, np.float32)
        self.assertEqual(pe.shape, (50, 16))
        expected = reference.sinusoid(np.arange(50), 16)
        np.testing.assert_allclose(pe, expected, rtol=0, atol=FLOAT32_TOLERANCE)
        # Spot check from the published d = 16 figures: pe[5][:2].
        np.testing.assert_allclose(pe[5, :2], [-0.9589, 0.2837], atol=1e-4)

    def test_encode_positions_far_positions_from_npy(self):
        # Exact integer positions where float32 angle math would be off by
        # 0.89 in sin at 2^24 + 1, which float32 rounds to 2^24.
        positions = np.array([0, 2**24 + 1, 2**31 - 1, -12345], dtype=np.int64)
        np.save(self.path("positions.npy"), positions)
        out = self.path("far.npy")
        self.call("encode-positions", "--positions", self.path("positions.npy"),
                  "--dim", 8, "--out", out)
        np.testing.assert_allclose(np.load(out),
                                   reference.sinusoid(positions, 8),
                                   rtol=0, atol=FLOAT32_TOLERANCE)

    def test_encode_positions_csv_and_layout(self):
        out = self.path("pe.csv")
        self.call("encode-positions", "--start", 3, "--count", 5, "--step", 2,
                  "--dim", 6, "--base", 100, "--layout", "split_sin_cos",
                  "--out", out)
        pe = np.loadtxt(out, delimiter=",")
        expected = reference.sinusoid(np.arange(3, 13, 2), 6, base=100,
                                      layout="split_sin_cos")
        np.testing.assert_allclose(pe, expected, rtol=0, atol=FLOAT32_TOLERANCE)

    def test_encode_positions_with_content(self):
        content = np.linspace(-1, 1, 4 * 8, dtype=np.float32).reshape(4, 8)
        np.save(self.path("content.npy"), content)
        out = self.path("with_content.npy")
        self.call("encode-positions", "--content", self.path("content.npy"),
                  "--content_scale", 2.0, "--dim", 8, "--out", out)
        expected = 2.0 * content + reference.sinusoid(np.arange(4), 8)
        np.testing.assert_allclose(np.load(out), expected, rtol=0, atol=1e-5)

    def test_encode_positions_table_output(self):
        result = self.call("encode-positions", "--count", 3, "--dim", 4)
        self.assertIn("float32 [3,4]", result.stdout)
        # Row 1, column 0 is sin(1) = 0.841471.
        self.assertIn("0.841471", result.stdout)

    def test_learned_profile_and_list_profiles(self):
        result = self.call("list-profiles")
        self.assertIn("tiny-learned", result.stdout)
        self.assertIn("sin16", result.stdout)
        self.assertIn("6 x 2", result.stdout)
        out = self.path("learned.npy")
        self.call("encode-positions", "--profile", "tiny-learned",
                  "--positions", self._write_csv("rows.csv", "5\n0\n2\n"),
                  "--out", out)
        np.testing.assert_array_equal(np.load(out),
                                      self.learned_table[[5, 0, 2]])
        # A position beyond the table is OUT_OF_RANGE, exit status 1.
        result = harness.run_client(
            "--target", self.server.target, "encode-positions", "--profile",
            "tiny-learned", "--start", 4, "--count", 3)
        self.assertEqual(result.returncode, 1)
        self.assertIn("OUT_OF_RANGE", result.stderr)

    def _write_csv(self, name, text):
        with open(self.path(name), "w") as f:
            f.write(text)
        return self.path(name)

    def test_apply_rope_query_and_key(self):
        rng = np.random.default_rng(1)
        query = rng.standard_normal((5, 2, 8)).astype(np.float32)
        key = rng.standard_normal((5, 1, 8)).astype(np.float32)
        np.save(self.path("q.npy"), query)
        np.save(self.path("k.npy"), key)
        q_out, k_out = self.path("q_rot.npy"), self.path("k_rot.npy")
        result = self.call("apply-rope", "--query", self.path("q.npy"),
                           "--key", self.path("k.npy"), "--rotary_dim", 6,
                           "--start", 10, "--out", q_out, "--key_out", k_out)
        self.assertIn("attention_factor: 1", result.stdout)
        positions = np.arange(10, 15)
        np.testing.assert_allclose(np.load(q_out),
                                   reference.rope_half(query, positions, 6),
                                   rtol=0, atol=1e-5)
        np.testing.assert_allclose(np.load(k_out),
                                   reference.rope_half(key, positions, 6),
                                   rtol=0, atol=1e-5)

    def test_rope_tables(self):
        cos_out, sin_out = self.path("cos.npy"), self.path("sin.npy")
        result = self.call("rope-tables", "--count", 7, "--rotary_dim", 8,
                           "--base", 500000, "--cos_out", cos_out,
                           "--sin_out", sin_out)
        angles = np.arange(7)[:, None] * reference.rope_inv_freq(8, 500000)
        np.testing.assert_allclose(np.load(cos_out), np.cos(angles), rtol=0,
                                   atol=FLOAT32_TOLERANCE)
        np.testing.assert_allclose(np.load(sin_out), np.sin(angles), rtol=0,
                                   atol=FLOAT32_TOLERANCE)
        self.assertIn("inv_freq: 1 ", result.stdout)

    def test_alibi(self):
        out, slopes_out = self.path("bias.npy"), self.path("slopes.npy")
        self.call("alibi", "--num_heads", 6, "--q_len", 3, "--k_len", 5,
                  "--causal", "--out", out, "--slopes_out", slopes_out)
        np.testing.assert_allclose(np.load(slopes_out),
                                   reference.alibi_slopes(6), rtol=1e-7)
        np.testing.assert_allclose(np.load(out),
                                   reference.alibi_bias(6, 3, 5, causal=True),
                                   rtol=1e-6)

    def _observations(self):
        start = 1_700_000_000 * 10**9
        offsets_s = np.array([0, 30, 120, 420, 425])
        timestamps = start + offsets_s * 10**9
        values = np.array([[1.0, np.nan], [2.0, 5.0], [np.nan, 6.0],
                           [4.0, np.nan], [np.nan, np.nan]])
        ts_csv = self._write_csv(
            "timestamps.csv", "".join(f"{t}\n" for t in timestamps))
        values_csv = self._write_csv("values.csv", "a,b\n" + "".join(
            ",".join("" if np.isnan(v) else repr(v) for v in row) + "\n"
            for row in values))
        return timestamps, offsets_s, values, ts_csv, values_csv

    SPEC = ("temporal { content {} "
            "time { dim: 6 min_period_seconds: 60 max_period_seconds: 6000 } "
            "gaps { global_delta: true per_channel_delta: true } }")

    def _expected_features(self, timestamps, offsets_s, values):
        observed = ~np.isnan(values)
        content = np.concatenate([np.where(observed, values, 0.0),
                                  observed.astype(float)], axis=1)
        time = reference.time_ladder(offsets_s, 6, 60.0, 6000.0)
        global_delta = np.diff(offsets_s, prepend=offsets_s[0])[:, None]
        deltas = reference.channel_deltas(timestamps, observed)
        return np.concatenate([content, time, global_delta, deltas], axis=1)

    def test_encode_observations(self):
        timestamps, offsets_s, values, ts_csv, values_csv = self._observations()
        out = self.path("features.npy")
        result = self.call("encode-observations", "--timestamps", ts_csv,
                           "--values", values_csv, "--spec", self.SPEC,
                           "--out", out)
        features = np.load(out)
        self.assertEqual(features.dtype, np.float32)
        np.testing.assert_allclose(
            features, self._expected_features(timestamps, offsets_s, values),
            rtol=0, atol=FLOAT32_TOLERANCE)
        # The printed schema: entries (a block or a part of one, e.g.
        # "content.mask") tile the columns in block order.
        schema = [line.split()[:3] for line in result.stdout.splitlines()
                  if line.startswith("  ") and line.split()[0] != "block"]
        blocks = []
        next_offset = 0
        for name, offset, width in schema:
            if not blocks or blocks[-1] != name.split(".")[0]:
                blocks.append(name.split(".")[0])
            self.assertEqual(int(offset), next_offset, schema)
            next_offset += int(width)
        self.assertEqual(blocks, ["content", "time", "gaps"])
        self.assertEqual(next_offset, features.shape[1])

    def test_encode_observations_float16_output(self):
        timestamps, offsets_s, values, ts_csv, values_csv = self._observations()
        out = self.path("features16.npy")
        self.call("encode-observations", "--timestamps", ts_csv, "--values",
                  values_csv, "--spec", self.SPEC, "--output_dtype", "float16",
                  "--out", out)
        features = np.load(out)
        self.assertEqual(features.dtype, np.float16)
        # Rounded once from float32: half an fp16 ulp, 2^-11 relative.
        np.testing.assert_allclose(
            features.astype(np.float64),
            self._expected_features(timestamps, offsets_s, values),
            rtol=2**-11, atol=2**-12)

    def test_encode_observations_stream_equals_whole(self):
        _, _, _, ts_csv, values_csv = self._observations()
        whole, streamed = self.path("whole.npy"), self.path("streamed.npy")
        self.call("encode-observations", "--timestamps", ts_csv, "--values",
                  values_csv, "--spec", self.SPEC, "--out", whole)
        result = self.call("encode-observations", "--timestamps", ts_csv,
                           "--values", values_csv, "--spec", self.SPEC,
                           "--stream", "--chunk_rows", 2, "--out", streamed)
        self.assertIn("streamed 3 chunks", result.stderr)
        # The server carries gap state across chunks: identical bytes.
        np.testing.assert_array_equal(np.load(streamed), np.load(whole))

    # --- Panels from one CSV table (--observations_csv) ---------------------

    PANEL_SPEC = ("temporal { content {} time { dim: 4 } "
                  "gaps { include_mask: true } calendar { "
                  "time_zone: \"America/New_York\" fields: [HOUR_OF_DAY] } }")

    @staticmethod
    def _panel_series(count=40, rows=30, channels=("hr", "spo2")):
        """Series key -> (times ns [rows], values [rows, C] with NaNs)."""
        series = {}
        start = 1_704_067_200 * 10**9
        for s in range(count):
            t = start + s * 7919 * 10**9 + np.arange(rows) * 600 * 10**9 \
                + (np.arange(rows) * 2654435761 % 600_000) * 10**6
            v = np.sin(0.01 * (s * rows + np.arange(rows)[:, None])
                       + np.arange(len(channels)))
            v[(np.arange(rows)[:, None] + s + np.arange(len(channels))) % 4 == 0] = np.nan
            series[f"patient {s}, ward \"{s % 3}\""] = (t, v)
        return series

    def _direct_panel(self, series, channels, zones=None, long=False):
        """One EncodeObservations panel call through the Python stubs."""
        import grpc
        from phasor_client import pb, to_tensor, from_tensor
        from phasor_client import _stubs
        stub = _stubs.load().encoder_pb2_grpc.EncoderStub(
            grpc.insecure_channel(self.server.target, options=[
                ("grpc.max_receive_message_length", 64 << 20),
                ("grpc.max_send_message_length", 64 << 20)]))
        request = pb.EncodeObservationsRequest()
        from google.protobuf import text_format
        text_format.Parse(self.PANEL_SPEC, request.spec)
        obs = request.observations
        keys = list(series)
        offsets = np.cumsum([0] + [len(series[k][0]) for k in keys])
        obs.series_offsets.CopyFrom(to_tensor(offsets.astype(np.int64)))
        obs.channel_names.extend(channels)
        if long:
            times, chans, vals = [], [], []
            for k in keys:
                t, v = series[k]
                for i in range(len(t)):
                    for c in range(len(channels)):
                        times.append(t[i]); chans.append(c); vals.append(v[i, c])
            obs.event_times.CopyFrom(to_tensor(np.array(times, np.int64)))
            obs.event_channels.CopyFrom(to_tensor(np.array(chans, np.int32)))
            obs.event_values.CopyFrom(to_tensor(np.array(vals, np.float64)))
            obs.num_channels = len(channels)
            offsets = offsets * len(channels)
            obs.series_offsets.CopyFrom(to_tensor(offsets.astype(np.int64)))
        else:
            obs.timestamps.CopyFrom(to_tensor(
                np.concatenate([series[k][0] for k in keys]).astype(np.int64)))
            obs.values.CopyFrom(to_tensor(
                np.concatenate([series[k][1] for k in keys]).astype(np.float64)))
        if zones is not None:
            names = sorted(set(zones))
            obs.time_zones.extend(names)
            obs.time_zone_index.CopyFrom(to_tensor(
                np.array([names.index(z) for z in zones], np.int32)))
        response = stub.EncodeObservations(request, timeout=60)
        return (from_tensor(response.features),
                from_tensor(response.series_offsets), response.schema)

    @staticmethod
    def _csv_cell(text):
        if any(c in text for c in ',"\n'):
            return '"' + text.replace('"', '""') + '"'
        return text

    def test_encode_observations_panel_wide_csv(self):
        channels = ("hr", "spo2")
        series = self._panel_series(channels=channels)
        keys = list(series)
        zones = ["Asia/Kolkata" if i % 2 else "UTC" for i in range(len(keys))]
        # Rows interleaved across series (not contiguous), times as ISO 8601
        # for even series and ns for odd ones.
        lines = ["series,time,hr,spo2,zone"]
        for i in range(len(series[keys[0]][0])):
            for s, k in enumerate(keys):
                t, v = series[k]
                when = (np.datetime_as_string(np.datetime64(int(t[i]), "ns"))
                        + "Z") if s % 2 == 0 else str(t[i])
                cells = ["" if np.isnan(x) else repr(float(x)) for x in v[i]]
                lines.append(",".join([self._csv_cell(k), when, *cells, zones[s]]))
        table = self._write_csv("panel_wide.csv", "\n".join(lines) + "\n")
        out = self.path("panel_wide_features.csv")
        result = self.call("encode-observations", "--observations_csv", table,
                           "--time_zone_column", "zone",
                           "--spec", self.PANEL_SPEC,
                           "--max_call_bytes", 20000, "--out", out)
        self.assertIn(f"panel: {len(keys)} series", result.stderr)
        self.assertNotIn(" 1 call", result.stderr)  # Split by the client.
        expected, expected_offsets, schema = self._direct_panel(
            series, channels, zones)

        import csv
        from phasor_client import feature_names
        with open(out, newline="") as f:
            rows = list(csv.reader(f))
        header, body = rows[0], rows[1:]
        # The input's series and time columns, then the Python client's
        # names: channels by name (content.values.hr, gaps.mask.spo2).
        self.assertEqual(header[:2], ["series", "time"])
        self.assertEqual(header[2:], feature_names(schema, channels))
        self.assertIn("gaps.mask.spo2", header)
        got = np.array([[float(x) for x in row[2:]] for row in body],
                       dtype=np.float32)
        np.testing.assert_array_equal(got, expected)
        got_keys = [row[0] for row in body]
        want_keys = [k for k, n in zip(keys, np.diff(expected_offsets))
                     for _ in range(n)]
        self.assertEqual(got_keys, want_keys)
        # Each output row joins back onto its input line by (series, time
        # as written): the values there are the row's content.values.
        values_of = {}
        for line in list(csv.reader(lines[1:])):
            values_of[(line[0], line[1])] = line[2:4]
        self.assertEqual(len(values_of), len(body))
        hr, spo2 = header.index("content.values.hr"), header.index(
            "content.values.spo2")
        for row in body:
            for column, cell in ((hr, values_of[(row[0], row[1])][0]),
                                 (spo2, values_of[(row[0], row[1])][1])):
                want = 0.0 if cell == "" else np.float32(float(cell))
                self.assertEqual(np.float32(row[column]), want, row[:2])

    def test_encode_observations_panel_long_csv(self):
        channels = ("hr", "spo2")
        series = self._panel_series(count=25, channels=channels)
        keys = list(series)
        lines = ["series,time,channel,value"]
        for k in keys:  # Contiguous; decimal seconds (--time_unit s).
            t, v = series[k]
            for i in range(len(t)):
                seconds = f"{t[i] // 10**9}.{t[i] % 10**9:09d}"
                for c, name in enumerate(channels):
                    value = "" if np.isnan(v[i, c]) else repr(float(v[i, c]))
                    lines.append(f"{self._csv_cell(k)},{seconds},{name},{value}")
        table = self._write_csv("panel_long.csv", "\n".join(lines) + "\n")
        out = self.path("panel_long_features.npy")
        result = self.call("encode-observations", "--observations_csv", table,
                           "--time_unit", "s", "--spec", self.PANEL_SPEC,
                           "--max_call_bytes", 20000, "--out", out)
        self.assertIn("events", result.stderr)
        expected, expected_offsets, _ = self._direct_panel(series, channels,
                                                           long=True)
        np.testing.assert_array_equal(np.load(out), expected)
        np.testing.assert_array_equal(
            np.load(self.path("panel_long_features.series_offsets.npy")),
            expected_offsets)

    # --- Times, column names and lines of CSV input -------------------------

    GAP_SPEC = "temporal { gaps { per_channel_delta: true } }"

    def _fail(self, *args):
        result = harness.run_client("--target", self.server.target, *args)
        self.assertEqual(result.returncode, 1,
                         f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}")
        return result.stderr

    @staticmethod
    def _read_csv(path):
        import csv
        with open(path, newline="") as f:
            return list(csv.reader(f))

    def test_panel_csv_integer_seconds_need_time_unit(self):
        # An hour apart in integer seconds: read as nanoseconds, 3.6 us.
        table = self._write_csv("seconds.csv", "series,time,hr,spo2\n"
                                "a,1704096000,72,98\n"
                                "a,1704099600,75,\n")
        stderr = self._fail("encode-observations", "--observations_csv", table,
                            "--spec", self.GAP_SPEC)
        self.assertIn("seconds.csv: line 2 column 'time'", stderr)
        self.assertIn("pass --time_unit s", stderr)
        out = self.path("seconds_features.csv")
        self.call("encode-observations", "--observations_csv", table,
                  "--time_unit", "s", "--spec", self.GAP_SPEC, "--out", out)
        rows = self._read_csv(out)
        self.assertEqual(rows[0], ["series", "time", "gaps.global_delta",
                                   "gaps.delta.hr", "gaps.delta.spo2"])
        self.assertEqual(rows[2][:2], ["a", "1704099600"])
        self.assertEqual(float(rows[2][2]), 3600.0)
        self.assertEqual(float(rows[2][3]), 3600.0)
        # The same in milliseconds, long layout: one output row per event,
        # with its channel.
        table = self._write_csv("millis.csv", "series,time,channel,value\n"
                                "a,1704096000000,hr,72\n"
                                "a,1704099600000,hr,75\n"
                                "a,1704099600000,spo2,97\n")
        self.assertIn("--time_unit", self._fail(
            "encode-observations", "--observations_csv", table,
            "--spec", self.GAP_SPEC))
        out = self.path("millis_features.csv")
        self.call("encode-observations", "--observations_csv", table,
                  "--time_unit", "ms", "--spec", self.GAP_SPEC, "--out", out)
        rows = self._read_csv(out)
        self.assertEqual(rows[0], ["series", "time", "channel",
                                   "gaps.global_delta", "gaps.delta.hr",
                                   "gaps.delta.spo2"])
        self.assertEqual([row[:3] for row in rows[1:]],
                         [["a", "1704096000000", "hr"],
                          ["a", "1704099600000", "hr"],
                          ["a", "1704099600000", "spo2"]])
        self.assertEqual(float(rows[2][4]), 3600.0)

    def test_timestamps_files_take_time_unit(self):
        timestamps, _, _, ns_csv, values_csv = self._observations()
        seconds = self._write_csv(
            "ts_seconds.csv", "".join(f"{t // 10**9}\n" for t in timestamps))
        decimal = self._write_csv(
            "ts_decimal.csv", "".join(f"{t / 1e9:.1f}\n" for t in timestamps))
        millis = self.path("ts_millis.npy")
        np.save(millis, timestamps // 10**6)
        whole = self.path("ts_whole.npy")
        self.call("encode-observations", "--timestamps", ns_csv, "--values",
                  values_csv, "--spec", self.SPEC, "--out", whole)
        for path, unit in ((seconds, "s"), (decimal, "s"), (millis, "ms")):
            stderr = self._fail("encode-observations", "--timestamps", path,
                                "--values", values_csv, "--spec", self.SPEC)
            self.assertIn("--timestamps: ", stderr)
            self.assertIn("pass --time_unit s", stderr)
            out = self.path(f"ts_{unit}_{os.path.basename(path)}.npy")
            self.call("encode-observations", "--timestamps", path,
                      "--time_unit", unit, "--values", values_csv,
                      "--spec", self.SPEC, "--out", out)
            np.testing.assert_array_equal(np.load(out), np.load(whole), path)
        # An unknown unit is refused, naming the flag.
        self.assertIn("--time_unit: 'fortnights' is not one of", harness.run_client(
            "--target", self.server.target, "encode-observations",
            "--timestamps", seconds, "--time_unit", "fortnights", "--values",
            values_csv, "--spec", self.SPEC).stderr)

    def test_panel_csv_server_errors_name_the_line(self):
        # Interleaved series; b goes back in time on line 5, the server's
        # observations.series[1].timestamps[1].
        table = self._write_csv("backwards.csv", "series,time,hr\n"
                                "a,2024-01-01T00:00:00Z,1\n"
                                "b,2024-01-01T00:00:00Z,1\n"
                                "a,2024-01-01T01:00:00Z,2\n"
                                "b,2023-12-31T23:00:00Z,2\n")
        stderr = self._fail("encode-observations", "--observations_csv", table,
                            "--spec", self.GAP_SPEC)
        self.assertIn('backwards.csv: line 5 (series "b"): ', stderr)
        self.assertIn("series[1].timestamps[1]", stderr)
        # A value the server refuses (observed values must be finite): the
        # flat index of values [T, C] maps to its row's line.
        table = self._write_csv("infinite.csv", "series,time,hr,spo2\n"
                                "a,2024-01-01T00:00:00Z,1,2\n"
                                "b,2024-01-01T00:00:00Z,1,2\n"
                                "b,2024-01-01T01:00:00Z,3,inf\n"
                                "a,2024-01-01T01:00:00Z,2,2\n")
        stderr = self._fail("encode-observations", "--observations_csv", table,
                            "--spec", self.GAP_SPEC)
        self.assertIn('infinite.csv: line 4 (series "b"): ', stderr)
        # A panel split over many calls: the line of a row in a late
        # sub-call. Rows are interleaved, so line = 2 + row * S + series.
        series = self._panel_series(count=40)
        keys = list(series)
        bad_series, bad_row = 39, 20
        t, _ = series[keys[bad_series]]
        t[bad_row] = t[bad_row - 1] - 1
        lines = ["series,time,hr,spo2"]
        for i in range(len(series[keys[0]][0])):
            for k in keys:
                t, v = series[k]
                cells = ["" if np.isnan(x) else repr(float(x)) for x in v[i]]
                lines.append(",".join([self._csv_cell(k), str(t[i]), *cells]))
        table = self._write_csv("split_backwards.csv", "\n".join(lines) + "\n")
        stderr = self._fail("encode-observations", "--observations_csv", table,
                            "--spec", self.PANEL_SPEC, "--max_call_bytes", 20000)
        self.assertIn("panel sub-call for series [", stderr)  # It was split.
        self.assertIn(f"split_backwards.csv: line "
                      f"{2 + bad_row * len(keys) + bad_series} (series ", stderr)

    def test_describe_prints_ladder(self):
        result = self.call("describe", "--dim", 32, "--num_offsets", 131,
                           "--show_similarity")
        # The ladder table ends where the summary lines begin.
        lines = result.stdout.split("unambiguous range")[0].splitlines()
        ladder = {}
        for line in lines:
            parts = line.split()
            if len(parts) == 3 and parts[0].isdigit():
                ladder[int(parts[0])] = (float(parts[1]), float(parts[2]))
        self.assertEqual(sorted(ladder), list(range(16)))
        omega = 10000.0 ** (-2.0 * np.arange(16) / 32)
        wavelengths, longest, distance, offset, _ = reference.describe(omega,
                                                                       131)
        for j in range(16):
            self.assertAlmostEqual(ladder[j][0], omega[j], delta=1e-9 * omega[j])
            self.assertAlmostEqual(ladder[j][1], wavelengths[j],
                                   delta=1e-8 * wavelengths[j])
        # Published figures: pair 15 wavelength 35332.94752055899 tokens,
        # nearest code 1.1716234976260362 at k = 1 over k = 1..130.
        self.assertAlmostEqual(ladder[15][1], 35332.94752055899, places=4)
        self.assertIn(f"unambiguous range: {longest:.10g} positions",
                      result.stdout)
        self.assertIn(f"nearest code distance: {distance:.10g} at offset "
                      f"{offset}", result.stdout)
        self.assertAlmostEqual(distance, 1.1716234976260362, places=12)

    def test_health(self):
        result = self.call("health")
        self.assertEqual(result.stdout.strip(), "server: SERVING")
        result = self.call("health", "--service", "phasor.v1.Encoder")
        self.assertEqual(result.stdout.strip(), "phasor.v1.Encoder: SERVING")

    def test_invalid_argument_names_field(self):
        result = harness.run_client("--target", self.server.target,
                                    "encode-positions", "--count", 4,
                                    "--dim", 7)
        self.assertEqual(result.returncode, 1)
        self.assertIn("INVALID_ARGUMENT", result.stderr)
        self.assertIn("dim", result.stderr)

    def test_unknown_command_is_usage_error(self):
        result = harness.run_client("frobnicate")
        self.assertEqual(result.returncode, 2)
        self.assertIn("encode-positions", result.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
