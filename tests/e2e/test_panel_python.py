"""EncoderClient.encode_panel against real phasor-servers: a panel equals its
series sent one by one, bytewise; states carry a panel over to another
server; a panel the client cuts to fit its message limit equals one uncut
call; a panel over the limit is cut, never refused."""

import contextlib
import unittest

import grpc
import numpy as np
from google.protobuf import text_format

import harness
import phasor_client
from phasor_client import _panel, _stubs, field_violations, pb

SPEC = """temporal {
  content {}
  time { dim: 8 min_period_seconds: 60 max_period_seconds: 31557600 }
  gaps { include_mask: true include_last_value: true }
  calendar { time_zone: "UTC"
             fields: [HOUR_OF_DAY, DAY_OF_WEEK, DAY_OF_MONTH, MONTH_OF_YEAR]
             include_utc_offset: true include_dst: true }
}"""
ZONES = ["America/New_York", "Europe/Berlin", "Asia/Kolkata",
         "Australia/Lord_Howe", "UTC"]
NUM_CHANNELS = 3
# 2024-03-10T00:00:00Z, hours before New York's spring-forward.
DST_START_NS = 1710028800 * 10**9
SMALL_LIMIT = 1 << 20


def spec_in(zone):
    spec = pb.EncoderSpec()
    text_format.Parse(SPEC, spec)
    spec.temporal.calendar.time_zone = zone
    return spec


def random_panel(rng, lengths):
    """Timestamps, values [T, C] and offsets for series of these lengths:
    ties (zero steps), NaN values, some series across a DST change."""
    timestamps, values = [], []
    for length in lengths:
        start = (DST_START_NS if rng.random() < 0.3 else
                 int(rng.integers(1577836800, 1767225600)) * 10**9)
        steps = rng.choice([0, 10**9, 3600 * 10**9, 0], size=length) + \
            rng.integers(0, 7200 * 10**9, size=length) * (rng.random(length) < 0.5)
        times = start + np.cumsum(steps).astype(np.int64)
        timestamps.append(times)
        series_values = rng.standard_normal((length, NUM_CHANNELS))
        series_values[rng.random((length, NUM_CHANNELS)) < 0.3] = np.nan
        values.append(series_values)
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    return (np.concatenate(timestamps).astype(np.int64),
            np.concatenate(values).reshape(-1, NUM_CHANNELS), offsets)


def assert_same_states(test, got, expected):
    test.assertEqual(len(got), len(expected))
    for index, (a, b) in enumerate(zip(got, expected)):
        test.assertEqual(a, b, f"state of series {index}")


class Counting:
    """Wraps a stub's EncodeObservations to count the requests sent."""

    def __init__(self, method):
        self.method = method
        self.requests = []

    def __call__(self, request, **kwargs):
        self.requests.append(request.ByteSize())
        return self.method(request, **kwargs)

    def future(self, request, **kwargs):
        self.requests.append(request.ByteSize())
        return self.method.future(request, **kwargs)


@contextlib.contextmanager
def uncut(client):
    """The block's panels from `client` go in one request each, as far as
    its message limit allows (the client's own cap on a request, PIECE_BYTES,
    lifted): the references that cut panels must equal. Yields the Counting
    of the requests sent."""
    saved_bytes = _panel.PIECE_BYTES
    saved_method = client._stub.EncodeObservations
    counting = Counting(saved_method)
    _panel.PIECE_BYTES = 1 << 62
    client._stub.EncodeObservations = counting
    try:
        yield counting
    finally:
        _panel.PIECE_BYTES = saved_bytes
        client._stub.EncodeObservations = saved_method


def carrying_rows(counting):
    """The requests of a Counting that carried rows: the probe for F has
    one empty series, a few hundred bytes."""
    return [size for size in counting.requests if size > 4096]


class FakeRpcError(grpc.RpcError):
    """A failed call as gRPC reports it: a message and, for an error about
    `field`, a google.rpc.BadRequest naming it."""

    def __init__(self, field, description):
        super().__init__()
        self._details = (description if field is None
                         else f"{field}: {description}")
        status = _stubs.status_pb2.Status(code=3, message=self._details)
        if field is not None:
            bad_request = _stubs.error_details_pb2.BadRequest()
            bad_request.field_violations.add(field=field,
                                             description=description)
            status.details.add().Pack(bad_request)
        self._trailers = (("grpc-status-details-bin",
                           status.SerializeToString()),)

    def code(self):
        return grpc.StatusCode.INVALID_ARGUMENT

    def details(self):
        return self._details

    def trailing_metadata(self):
        return self._trailers


class PanelTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.server = harness.Server().start()
        cls.other = harness.Server().start()
        cls.small = harness.Server(
            [f"--max_message_bytes={SMALL_LIMIT}"]).start()
        cls.client = cls.server.client(deadline_seconds=60)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        for server in (cls.server, cls.other, cls.small):
            server.__exit__(None, None, None)

    def test_panel_equals_series_one_by_one(self):
        rng = np.random.default_rng(7)
        for trial in range(3):
            lengths = rng.integers(0, 60, size=25)
            lengths[[0, 5, 24]] = 0      # Empty series, first and last too.
            lengths[[3, 11]] = 1         # One-row series.
            timestamps, values, offsets = random_panel(rng, lengths)
            zone_index = rng.integers(0, len(ZONES), size=len(lengths))
            panel = self.client.encode_panel(
                timestamps, values, series_offsets=offsets,
                time_zones=ZONES, time_zone_index=zone_index,
                spec=spec_in("UTC"))
            self.assertEqual(panel.features.shape[0], len(timestamps))
            np.testing.assert_array_equal(panel.series_offsets, offsets)
            self.assertEqual(len(panel.states), len(lengths))
            for s in range(len(lengths)):
                begin, end = offsets[s], offsets[s + 1]
                # An empty series too: its state is a zero-row call's.
                single = self.client.encode_observations(
                    timestamps[begin:end], values[begin:end],
                    spec=spec_in(ZONES[zone_index[s]]))
                self.assertEqual(
                    panel.features[begin:end].tobytes(),
                    single.features.tobytes(), f"trial {trial} series {s}")
                # The meanings name the zone: the panel's says "the series'
                # zone"; the columns are the same.
                self.assertEqual(
                    [(e.block, e.offset, e.width) for e in panel.schema],
                    [(e.block, e.offset, e.width) for e in single.schema])
                self.assertEqual(panel.states[s], single.state,
                                 f"trial {trial} series {s}")

    def test_series_ids_and_datetime64(self):
        rng = np.random.default_rng(3)
        timestamps, values, offsets = random_panel(rng, [4, 0, 7, 1, 9])
        by_offsets = self.client.encode_panel(
            timestamps, values, series_offsets=offsets, spec=SPEC)
        labels = np.repeat(np.array(["a", "b", "c", "d", "e"]),
                           np.diff(offsets))
        by_ids = self.client.encode_panel(
            timestamps.view("datetime64[ns]"), values, series_ids=labels,
            spec=SPEC)
        # Labels see no empty series: 4 of the 5.
        np.testing.assert_array_equal(by_ids.series_offsets,
                                      [0, 4, 11, 12, 21])
        self.assertEqual(by_ids.features.tobytes(),
                         by_offsets.features.tobytes())
        with self.assertRaises(ValueError):
            self.client.encode_panel(timestamps, values, spec=SPEC,
                                     series_ids=np.arange(len(timestamps)) % 2)
        with self.assertRaises(TypeError):
            self.client.encode_panel(timestamps.astype(np.float32), values,
                                     series_offsets=offsets, spec=SPEC)

    def test_states_continue_on_another_server(self):
        rng = np.random.default_rng(11)
        lengths = rng.integers(0, 40, size=30)
        timestamps, values, offsets = random_panel(rng, lengths)
        zone_index = rng.integers(0, len(ZONES), size=len(lengths))
        options = dict(time_zones=ZONES, time_zone_index=zone_index,
                       spec=spec_in("UTC"))
        whole = self.client.encode_panel(timestamps, values,
                                         series_offsets=offsets, **options)
        # Each series cut at a random row (possibly at a tie, or at 0).
        cuts = offsets[:-1] + (rng.random(len(lengths)) *
                               (lengths + 1)).astype(np.int64)
        first_rows = np.concatenate([np.arange(offsets[s], cuts[s])
                                     for s in range(len(lengths))]).astype(int)
        second_rows = np.concatenate([np.arange(cuts[s], offsets[s + 1])
                                      for s in range(len(lengths))]).astype(int)
        first_offsets = np.concatenate(([0], np.cumsum(cuts - offsets[:-1])))
        second_offsets = np.concatenate(([0], np.cumsum(offsets[1:] - cuts)))
        first = self.client.encode_panel(
            timestamps[first_rows], values[first_rows],
            series_offsets=first_offsets, **options)
        with self.other.client(deadline_seconds=60) as other:
            second = other.encode_panel(
                timestamps[second_rows], values[second_rows],
                series_offsets=second_offsets, states=first.states, **options)
        joined = np.empty_like(whole.features)
        joined[first_rows] = first.features
        joined[second_rows] = second.features
        self.assertEqual(joined.tobytes(), whole.features.tobytes())
        assert_same_states(self, second.states, whole.states)

    def big_panel(self, seed, num_series=400, long_series_rows=40000):
        """~1.5 MB in, ~6 MB out: over SMALL_LIMIT both ways, with one
        series that alone is over it."""
        rng = np.random.default_rng(seed)
        lengths = rng.integers(0, 60, size=num_series)
        lengths[num_series // 3] = long_series_rows
        lengths[num_series // 2] = 0
        timestamps, values, offsets = random_panel(rng, lengths)
        zone_index = rng.integers(0, len(ZONES), size=num_series)
        return timestamps, values, offsets, zone_index

    def uncut_panel(self, *args, **kwargs):
        """self.client.encode_panel(...) sent as one request (checked)."""
        with uncut(self.client) as one:
            whole = self.client.encode_panel(*args, **kwargs)
        self.assertEqual(len(carrying_rows(one)), 1)
        return whole

    def test_client_cut_equals_one_call(self):
        timestamps, values, offsets, zone_index = self.big_panel(5)
        options = dict(series_offsets=offsets, time_zones=ZONES,
                       time_zone_index=zone_index, spec=spec_in("UTC"))
        whole = self.uncut_panel(timestamps, values, **options)
        with self.small.client(deadline_seconds=60,
                               max_message_bytes=SMALL_LIMIT) as small:
            counting = Counting(small._stub.EncodeObservations)
            small._stub.EncodeObservations = counting
            cut = small.encode_panel(timestamps, values, **options)
        # The probe for F plus the cut requests, each within half the limit
        # (plus the estimate's slack).
        self.assertGreater(len(counting.requests), 5)
        self.assertLess(max(counting.requests), SMALL_LIMIT * 0.6)
        self.assertEqual(cut.features.dtype, whole.features.dtype)
        self.assertEqual(cut.features.tobytes(), whole.features.tobytes())
        self.assertEqual(cut.schema, whole.schema)
        np.testing.assert_array_equal(cut.series_offsets, offsets)
        assert_same_states(self, cut.states, whole.states)
        # An empty chunk of every series hands the states back unchanged.
        with self.small.client(deadline_seconds=60,
                               max_message_bytes=SMALL_LIMIT) as small:
            again = small.encode_panel(timestamps[:0], values[:0],
                                       series_offsets=np.zeros_like(offsets),
                                       states=cut.states, time_zones=ZONES,
                                       time_zone_index=zone_index,
                                       spec=spec_in("UTC"))
        assert_same_states(self, again.states, whole.states)

    def test_default_client_sends_requests_of_piece_bytes(self):
        """Under the default 64 MiB limit a panel whose features exceed
        PIECE_BYTES still goes in requests of at most PIECE_BYTES each way
        (gRPC Python's large replies are slow, _panel.PIECE_BYTES), and the
        joined result equals the uncut call."""
        timestamps, values, offsets, zone_index = self.big_panel(29)
        options = dict(series_offsets=offsets, time_zones=ZONES,
                       time_zone_index=zone_index, spec=spec_in("UTC"))
        whole = self.uncut_panel(timestamps, values, **options)
        self.assertGreater(whole.features.nbytes, 2 * _panel.PIECE_BYTES)
        counting = Counting(self.client._stub.EncodeObservations)
        self.client._stub.EncodeObservations = counting
        try:
            cut = self.client.encode_panel(timestamps, values, **options)
        finally:
            self.client._stub.EncodeObservations = counting.method
        sent = carrying_rows(counting)
        # The requests carry ~1.5 MB: only the replies' cap cuts them.
        self.assertGreaterEqual(
            len(sent), -(-whole.features.nbytes // _panel.PIECE_BYTES))
        self.assertLessEqual(max(sent), _panel.PIECE_BYTES)
        self.assertEqual(cut.features.tobytes(), whole.features.tobytes())
        assert_same_states(self, cut.states, whole.states)

    def test_over_the_server_limit_is_cut_not_refused(self):
        timestamps, values, offsets, zone_index = self.big_panel(9)
        with uncut(self.client):
            whole = self.client.encode_panel(
                timestamps, values, series_offsets=offsets, time_zones=ZONES,
                time_zone_index=zone_index, spec=spec_in("UTC"))
        # The client believes in 64 MiB (its requests of up to PIECE_BYTES
        # lifted too); the server allows 1 MiB.
        with self.small.client(deadline_seconds=60) as client, uncut(client):
            cut = client.encode_panel(
                timestamps, values, series_offsets=offsets, time_zones=ZONES,
                time_zone_index=zone_index, spec=spec_in("UTC"))
        self.assertEqual(cut.features.tobytes(), whole.features.tobytes())
        assert_same_states(self, cut.states, whole.states)
        # float16 output and the long layout take the same path.
        with self.small.client(deadline_seconds=60,
                               max_message_bytes=SMALL_LIMIT) as client:
            half = client.encode_panel(
                timestamps, values, series_offsets=offsets, time_zones=ZONES,
                time_zone_index=zone_index, spec=spec_in("UTC"),
                output_dtype="float16")
        self.assertEqual(half.features.dtype, np.float16)
        np.testing.assert_allclose(half.features, whole.features,
                                   atol=2e-3 * 64, rtol=2e-3)

    def test_long_layout_cut_equals_one_call(self):
        rng = np.random.default_rng(13)
        lengths = rng.integers(0, 50, size=300)
        lengths[17] = 60000
        times, _, offsets = random_panel(rng, lengths)
        channels = rng.integers(0, NUM_CHANNELS, size=len(times))
        event_values = rng.standard_normal(len(times))
        spec = ("temporal { time { dim: 4 } gaps { include_mask: true "
                "include_last_value: true } }")
        whole = self.uncut_panel(
            event_times=times, event_channels=channels,
            event_values=event_values, series_offsets=offsets, spec=spec)
        with self.small.client(deadline_seconds=60,
                               max_message_bytes=SMALL_LIMIT) as small:
            cut = small.encode_panel(
                event_times=times, event_channels=channels,
                event_values=event_values, series_offsets=offsets, spec=spec)
        self.assertEqual(cut.features.tobytes(), whole.features.tobytes())
        assert_same_states(self, cut.states, whole.states)

    def test_stream_of_panel_chunks_equals_one_call(self):
        """encode_panel_stream: every series cut in three stretches, sent as
        three panel messages of one stream, gives the whole panel's features
        and final states."""
        rng = np.random.default_rng(17)
        lengths = rng.integers(0, 50, size=40)
        lengths[[2, 9]] = 0
        timestamps, values, offsets = random_panel(rng, lengths)
        zone_index = rng.integers(0, len(ZONES), size=len(lengths))
        options = dict(time_zones=ZONES, time_zone_index=zone_index,
                       spec=spec_in("UTC"))
        whole = self.client.encode_panel(timestamps, values,
                                         series_offsets=offsets, **options)
        cuts = np.sort(offsets[:-1, None] + (rng.random((len(lengths), 2)) *
                       (lengths[:, None] + 1)).astype(np.int64), axis=1)
        bounds = np.column_stack((offsets[:-1], cuts, offsets[1:]))
        chunks, chunk_rows = [], []
        for k in range(3):
            rows = np.concatenate([np.arange(b[k], b[k + 1]) for b in bounds]
                                  ).astype(int)
            chunk_rows.append(rows)
            chunks.append(dict(
                timestamps=timestamps[rows], values=values[rows],
                series_offsets=np.concatenate(
                    ([0], np.cumsum(bounds[:, k + 1] - bounds[:, k])))))
        got = list(self.client.encode_panel_stream(iter(chunks), **options))
        self.assertEqual(len(got), 3)
        joined = np.empty_like(whole.features)
        for chunk, rows, panel in zip(chunks, chunk_rows, got):
            self.assertEqual(len(panel.states), len(lengths))
            np.testing.assert_array_equal(panel.series_offsets,
                                          chunk["series_offsets"])
            joined[rows] = panel.features
        self.assertEqual(joined.tobytes(), whole.features.tobytes())
        assert_same_states(self, got[-1].states, whole.states)
        # States of an earlier call start the stream, as in encode_panel.
        first = self.client.encode_panel(
            chunks[0]["timestamps"], chunks[0]["values"],
            series_offsets=chunks[0]["series_offsets"], **options)
        rest = list(self.client.encode_panel_stream(
            chunks[1:], states=first.states, **options))
        self.assertEqual(rest[-1].features.tobytes(), got[-1].features.tobytes())
        assert_same_states(self, rest[-1].states, whole.states)

    def test_stream_of_long_panel_chunks(self):
        rng = np.random.default_rng(19)
        lengths = rng.integers(0, 30, size=12)
        times, _, offsets = random_panel(rng, lengths)
        channels = rng.integers(0, NUM_CHANNELS, size=len(times))
        event_values = rng.standard_normal(len(times))
        spec = ("temporal { time { dim: 4 } gaps { include_mask: true "
                "include_last_value: true } }")
        whole = self.client.encode_panel(
            event_times=times, event_channels=channels,
            event_values=event_values, series_offsets=offsets, spec=spec,
            num_channels=NUM_CHANNELS)
        half = offsets[:-1] + lengths // 2
        first = np.concatenate([np.arange(offsets[s], half[s])
                                for s in range(len(lengths))]).astype(int)
        second = np.concatenate([np.arange(half[s], offsets[s + 1])
                                 for s in range(len(lengths))]).astype(int)

        def chunk(rows, counts):
            return dict(event_times=times[rows], event_channels=channels[rows],
                        event_values=event_values[rows],
                        series_offsets=np.concatenate(([0], np.cumsum(counts))))

        got = list(self.client.encode_panel_stream(
            [chunk(first, half - offsets[:-1]),
             chunk(second, offsets[1:] - half)],
            spec=spec, num_channels=NUM_CHANNELS))
        joined = np.empty_like(whole.features)
        joined[first] = got[0].features
        joined[second] = got[1].features
        self.assertEqual(joined.tobytes(), whole.features.tobytes())
        assert_same_states(self, got[1].states, whole.states)

    def test_stream_errors(self):
        rng = np.random.default_rng(23)
        timestamps, values, offsets = random_panel(rng, [3, 4])
        good = dict(timestamps=timestamps, values=values,
                    series_offsets=offsets)
        # A later chunk with another number of series: the server names it.
        other = dict(timestamps=timestamps, values=values,
                     series_offsets=np.array([0, 7]))
        with self.assertRaises(phasor_client.PhasorError) as raised:
            list(self.client.encode_panel_stream([good, other], spec=SPEC))
        self.assertEqual(raised.exception.code(),
                         grpc.StatusCode.INVALID_ARGUMENT)
        fields = [field for field, _ in raised.exception.field_violations()]
        self.assertEqual(fields, ["observations.series_offsets"])
        # The client's own checks name the chunk.
        with self.assertRaises(ValueError) as raised:
            list(self.client.encode_panel_stream(
                [good, dict(good, timestamp=timestamps)], spec=SPEC))
        self.assertIn("chunks[1]", str(raised.exception))

    def test_errors_name_the_callers_series_and_row(self):
        """A cut panel's error reads as the uncut call's: series, row (and
        the server's element index for values) in the caller's numbering."""
        timestamps, values, offsets, zone_index = self.big_panel(21)
        long_series = len(offsets) // 3  # big_panel's long series.
        short_series = max(s for s in range(len(offsets) - 1)
                           if offsets[s + 1] - offsets[s] >= 3)
        cases = []
        for series, row in ((long_series, 30000), (short_series, 2)):
            bad_row = int(offsets[series]) + row
            bad_times = timestamps.copy()
            bad_times[bad_row] = bad_times[bad_row - 1] - 10**9
            cases.append((bad_times, values))
            bad_values = values.copy()
            bad_values[bad_row, 1] = np.inf
            cases.append((timestamps, bad_values))
        for case_timestamps, case_values in cases:
            details = []
            for server, max_bytes in ((self.server, None),
                                      (self.small, SMALL_LIMIT)):
                with server.client(deadline_seconds=60,
                                   max_message_bytes=max_bytes) as client, \
                        (uncut(client) if max_bytes is None
                         else contextlib.nullcontext()):
                    with self.assertRaises(grpc.RpcError) as raised:
                        client.encode_panel(case_timestamps, case_values,
                                            series_offsets=offsets,
                                            spec=SPEC)
                error = raised.exception
                self.assertEqual(error.code(),
                                 grpc.StatusCode.INVALID_ARGUMENT)
                details.append((error.details(), field_violations(error)))
            self.assertIn("observations.series[", details[0][0])
            self.assertEqual(details[1], details[0])

class PlanTest(unittest.TestCase):
    """The client's cutting plan, without a server."""

    def layout(self, offsets):
        rows = int(offsets[-1])
        tensors = [_panel.RowTensor("timestamps",
                                    np.arange(rows, dtype=np.int64), "int64"),
                   _panel.RowTensor("values", np.zeros((rows, 3)),
                                    np.float64)]
        return _panel.Layout(pb, rows, np.asarray(offsets, dtype=np.int64),
                             tensors, pb.EncodeObservationsRequest(), None,
                             None, None)

    def budget(self, megabytes):
        return _panel.Budget(bytes=megabytes << 20, elements=1 << 23,
                             width=21, out_itemsize=4, out_fixed_bytes=8192,
                             in_fixed_bytes=8192, state_bytes=200)

    def test_fits_in_one_request(self):
        layout = self.layout(np.arange(0, 1001, 10))
        self.assertIsNone(_panel.plan(layout, self.budget(1)))

    def test_pieces_cover_every_row_once_within_budget(self):
        rng = np.random.default_rng(1)
        lengths = rng.integers(0, 300, size=2000)
        lengths[[7, 1500]] = [50000, 120000]   # Each over the budget alone.
        offsets = np.concatenate(([0], np.cumsum(lengths)))
        layout = self.layout(offsets)
        budget = self.budget(1)
        jobs = _panel.plan(layout, budget)
        pieces = [piece for job in jobs for piece in job]
        covered = np.concatenate([np.arange(p.row_begin, p.row_end)
                                  for p in pieces])
        np.testing.assert_array_equal(covered, np.arange(offsets[-1]))
        for job in jobs:
            if len(job) > 1:  # A chain: one series, consecutive rows.
                self.assertEqual({p.series_begin for p in job},
                                 {job[0].series_begin})
                self.assertIn(job[0].series_begin, (7, 1500))
        for piece in pieces:
            out_bytes = (piece.row_end - piece.row_begin) * 21 * 4
            self.assertLessEqual(out_bytes, budget.bytes)
            if piece.series_end - piece.series_begin > 1:
                self.assertEqual(piece.row_begin, offsets[piece.series_begin])
                self.assertEqual(piece.row_end, offsets[piece.series_end])

    def test_halves(self):
        offsets = np.array([0, 100, 100, 101, 5000, 5100])
        first, second = _panel.halves(_panel.Piece(0, 5, 0, 5100), offsets)
        self.assertEqual(first, _panel.Piece(0, 4, 0, 5000))
        self.assertEqual(second, _panel.Piece(4, 5, 5000, 5100))
        self.assertEqual(_panel.halves(_panel.Piece(3, 4, 101, 5000), offsets),
                         (_panel.Piece(3, 4, 101, 2550),
                          _panel.Piece(3, 4, 2550, 5000)))
        self.assertIsNone(_panel.halves(_panel.Piece(2, 3, 100, 101), offsets))

    def test_offsets_from_ids(self):
        np.testing.assert_array_equal(
            _panel.offsets_from_ids(np.array(["a", "a", "b", "c", "c"]), 5),
            [0, 2, 3, 5])
        with self.assertRaises(ValueError):
            _panel.offsets_from_ids(np.array([1, 2, 1]), 3)

    def test_paths_renumbered(self):
        offsets = np.array([0] * 10 + [100, 300])
        chunk = _panel.Piece(10, 11, 150, 200)
        # The error renumbers the violation's field and renders the message
        # again from it; the description is the server's, unread.
        error = _panel.PanelError(
            FakeRpcError("observations.series[0].values[4]",
                         "inf in channel 1 (observed values must be finite)"),
            chunk, offsets, {"values": 3}, _stubs.status_pb2,
            _stubs.error_details_pb2)
        self.assertEqual(
            error.details(),
            "observations.series[10].values[154]: inf in channel 1 "
            "(observed values must be finite)")
        self.assertEqual(field_violations(error), [(
            "observations.series[10].values[154]",
            "inf in channel 1 (observed values must be finite)")])
        status = _stubs.status_pb2.Status.FromString(
            dict(error.trailing_metadata())["grpc-status-details-bin"])
        self.assertEqual(status.message, error.details())
        # Without a violation the message is the server's.
        plain = _panel.PanelError(FakeRpcError(None, "deadline"), chunk,
                                  offsets, {}, _stubs.status_pb2,
                                  _stubs.error_details_pb2)
        self.assertEqual(plain.details(), "deadline")
        # The violation's field goes through its segments.
        self.assertEqual(
            _panel.panel_field("states[2].channels",
                               _panel.Piece(10, 12, 100, 300), offsets),
            "states[12].channels")
        self.assertEqual(
            _panel.panel_field("observations.series[0].values[4]", chunk,
                               offsets, {"values": 3}),
            "observations.series[10].values[154]")
        self.assertEqual(
            _panel.panel_field("observations.time_zone_index[1]",
                               _panel.Piece(10, 12, 100, 300), offsets),
            "observations.time_zone_index[11]")
        self.assertEqual(
            _panel.panel_field("spec.temporal.time.dim", chunk, offsets),
            "spec.temporal.time.dim")

    def test_field_path_segments(self):
        parse, format_path = (phasor_client.errors.parse_field_path,
                              phasor_client.errors.format_field_path)
        self.assertEqual(parse("observations.series[3].values[5]"),
                         [("observations", None), ("series", 3),
                          ("values", 5)])
        self.assertEqual(parse("states[2].channels[0].last_seen_ns"),
                         [("states", 2), ("channels", 0),
                          ("last_seen_ns", None)])
        self.assertEqual(parse("a[1][2]"), [("a", 1), ("", 2)])
        # Not the wire's form: kept whole, never misread as an index.
        for odd in ("a[-1]", "a[01]", "a[x]", "[3]", "a.[2]", "a[1]b",
                    "observations.series...(12 more bytes)"):
            self.assertTrue(all(index is None or name
                                for name, index in parse(odd)), odd)
        # Every string comes back as it was.
        rng = np.random.default_rng(3)
        alphabet = list("ab_.[]019-")
        for _ in range(20000):
            text = "".join(rng.choice(alphabet, rng.integers(0, 12)))
            self.assertEqual(format_path(parse(text)), text)


if __name__ == "__main__":
    unittest.main(verbosity=2)
