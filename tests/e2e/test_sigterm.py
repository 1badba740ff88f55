"""SIGTERM while requests are in flight: health turns NOT_SERVING and the
watch ends, every request the server accepted (unary calls and a stream
chunk) is answered, new calls are refused, the stream ends with UNAVAILABLE
once its accepted chunk is answered, and the process exits 0.

"Accepted" is what the server's own metrics count as started: a call that
reaches the server while it is already shutting down may be refused before
any handler sees it (UNAVAILABLE, or CANCELLED for a call the transport had
received but not yet dispatched), and one that reaches the service then is
answered UNAVAILABLE without being run. The test proves that every started
call was handled OK or refused so, and that the OK answers the load
generator saw are exactly the calls the server reports as handled OK.

QueuedCallsTest: more slow calls than gRPC's threads can run at once (the
callback API runs handlers on a few library threads: two on a 2-core host),
then SIGTERM. The calls running finish OK, the queued ones are refused, the
process exits as soon as the last call ends rather than after gRPC's
10-second poll, and the "stopped" record accounts for every call the
client saw fail.

IdleWatchTest: one idle grpc.health.v1.Health/Watch open, as a Kubernetes
probe or a client channel's health check keeps it, then SIGTERM, 20 times:
the process exits promptly every time. The Watch's last status can reach
a synchronous client before the server's GOAWAY does; such a client then
stops reading its socket and leaves the GOAWAY's PING unanswered for
seconds, which held the drain open until the server learned to close
connections that carry no call."""

import concurrent.futures
import json
import queue
import threading
import time
import unittest

import grpc
import numpy as np

import harness
import reference
from phasor_client import _stubs, pb, serving_status_name

BIG_MESSAGE_BYTES = 64 << 20
# 65536 x 64 float32 = 16 MiB per response: long enough on 2 cores that the
# calls are usually still running when the signal arrives.
BIG_COUNT, BIG_DIM, BIG_CALLS = 65536, 64, 6
GRACE_SECONDS = 20
ENCODE_POSITIONS = dict(grpc_service="phasor.v1.Encoder",
                        grpc_method="EncodePositions", grpc_type="unary")


# Stream features: a time sinusoid of width 64, then the global gap.
TIME_DIM = 64
# 200,000 rows x 66 float32 = 53 MB: a response the client leaves unread
# cannot be fully sent (HTTP/2 flow control), so that stream's chunk is still
# in flight at the signal and holds the server open until the test reads it.
BIG_STREAM_ROWS = 200_000
STREAM_MSG_RECEIVED = dict(grpc_service="phasor.v1.Encoder",
                           grpc_method="EncodeObservationsStream",
                           grpc_type="bidi_stream")


def stream_chunk(seconds):
    """Rows at `seconds` after a fixed instant, one channel."""
    timestamps = (1_700_000_000 + np.asarray(seconds)) * 10**9
    values = np.arange(len(seconds), dtype=np.float64)[:, None]
    return timestamps.astype(np.int64), values


class SigtermTest(unittest.TestCase):

    def test_drain_on_sigterm(self):
        server = harness.Server([
            f"--max_message_bytes={BIG_MESSAGE_BYTES}",
            f"--shutdown_grace_seconds={GRACE_SECONDS}", "--threads=1"])
        server.start()
        self.addCleanup(server.__exit__, None, None, None)
        client = server.client(deadline_seconds=60,
                               max_message_bytes=BIG_MESSAGE_BYTES)
        self.addCleanup(client.close)

        # 1. A health watch, open before the signal.
        watch_client = server.client(deadline_seconds=30)
        self.addCleanup(watch_client.close)
        watch = watch_client.watch_health("")
        self.assertEqual(serving_status_name(next(watch).status), "SERVING")

        # 2. A stream with one chunk answered; its second chunk comes below.
        chunks = queue.Queue()
        spec = pb.EncoderSpec(temporal=pb.TemporalSpec(
            time=pb.TimeBlock(dim=TIME_DIM),
            gaps=pb.GapsBlock(global_delta=True)))

        def chunk_source():
            while True:
                item = chunks.get(timeout=60)
                if item is None:
                    return
                yield item

        # Its own connection, so its stalled response shares no flow-control
        # window with the unary calls.
        stream_client = server.client(deadline_seconds=60,
                                      max_message_bytes=BIG_MESSAGE_BYTES)
        self.addCleanup(stream_client.close)
        responses = stream_client.encode_observations_stream(chunk_source(),
                                                             spec=spec)
        chunks.put(stream_chunk([0, 10, 30]))
        first = next(responses)
        np.testing.assert_array_equal(first.features[:, TIME_DIM], [0, 10, 20])

        # 3. Large unary calls, all accepted before the signal.
        pool = concurrent.futures.ThreadPoolExecutor(BIG_CALLS)
        self.addCleanup(pool.shutdown)
        futures = [pool.submit(client.encode_positions, count=BIG_COUNT,
                               dim=BIG_DIM) for _ in range(BIG_CALLS)]
        deadline = time.monotonic() + 20
        while True:
            samples = harness.parse_metrics(server.metrics())
            started = harness.metric_value(
                samples, "grpc_server_started_total", **ENCODE_POSITIONS) or 0
            if started >= BIG_CALLS or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        self.assertEqual(started, BIG_CALLS, "calls not accepted in time")
        in_flight = harness.metric_value(samples, "phasor_in_flight_requests")
        unary_done = harness.metric_value(
            samples, "grpc_server_handled_total", **ENCODE_POSITIONS)

        # 3b. The stream's second chunk, read by the server before the
        # signal, its large response left unread: in flight across the drain,
        # it also keeps the server (and its /metrics) alive until the test has
        # looked at the drain.
        chunks.put(stream_chunk(60 + np.arange(BIG_STREAM_ROWS)))
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            received = harness.metric_value(
                harness.parse_metrics(server.metrics()),
                "grpc_server_msg_received_total", **STREAM_MSG_RECEIVED) or 0
            if received >= 2:
                break
            time.sleep(0.01)
        self.assertEqual(received, 2, "the stream's second chunk was not read")

        # 4. Small calls keep coming across the signal.
        stop_load = threading.Event()
        load_results = []

        def load():
            with server.client(deadline_seconds=30) as load_client:
                for _ in range(20000):
                    if stop_load.is_set():
                        return
                    try:
                        out = load_client.encode_positions(count=4, dim=4)
                        load_results.append(("OK", out))
                    except grpc.RpcError as error:
                        load_results.append((error.code().name,
                                             error.details()))

        load_thread = threading.Thread(target=load, daemon=True)
        load_thread.start()
        time.sleep(0.2)

        # 5. SIGTERM: health reports NOT_SERVING, then the watch ends (it
        # would otherwise hold the drain until the grace).
        server.send_signal()
        self.assertEqual(serving_status_name(next(watch).status),
                         "NOT_SERVING")
        with self.assertRaises(grpc.RpcError) as watch_end:
            next(watch)
        self.assertEqual(watch_end.exception.code(),
                         grpc.StatusCode.UNAVAILABLE)

        # 6. Every large call accepted before the signal completes OK, with
        # correct values.
        expected_rows = reference.sinusoid(np.array([0, BIG_COUNT - 1]),
                                           BIG_DIM)
        for future in futures:
            encodings = future.result(timeout=60)
            self.assertEqual(encodings.shape, (BIG_COUNT, BIG_DIM))
            np.testing.assert_allclose(encodings[[0, -1]], expected_rows,
                                       atol=2e-6)

        # 7. The load generator is refused once the server stops accepting.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and all(
                code == "OK" for code, _ in load_results):
            time.sleep(0.05)
        stop_load.set()
        load_thread.join(timeout=60)
        self.assertFalse(load_thread.is_alive())
        load_ok = sum(code == "OK" for code, _ in load_results)
        refused = {code for code, _ in load_results if code != "OK"}
        self.assertTrue(refused, "no call was refused after SIGTERM")
        self.assertTrue(refused <= {"UNAVAILABLE", "CANCELLED"}, refused)
        for code, out in load_results:
            if code == "OK":
                np.testing.assert_allclose(
                    out, reference.sinusoid(np.arange(4), 4), atol=2e-6)

        # 8. The server's view, while the stream still holds it open: every
        # EncodePositions call it started was handled, and handled OK; the
        # OK answers the clients saw are exactly those calls.
        samples = harness.parse_metrics(server.metrics())
        started = harness.metric_value(samples, "grpc_server_started_total",
                                       **ENCODE_POSITIONS)
        handled = harness.metric_value(samples, "grpc_server_handled_total",
                                       **ENCODE_POSITIONS)
        handled_ok = harness.metric_value(
            samples, "grpc_server_handled_total", grpc_code="OK",
            **ENCODE_POSITIONS)
        # Load calls that reached the service after the drain began were
        # answered UNAVAILABLE without being run (each retry attempt that
        # came back counts again).
        not_run = harness.metric_value(
            samples, "phasor_calls_refused_total", grpc_method="EncodePositions",
            reason="shutdown")
        handled_unavailable = harness.metric_value(
            samples, "grpc_server_handled_total", grpc_code="Unavailable",
            **ENCODE_POSITIONS)
        self.assertEqual(started, handled)
        self.assertEqual(handled_unavailable, not_run)
        self.assertEqual(handled, handled_ok + not_run)
        self.assertEqual(handled_ok, BIG_CALLS + load_ok)

        # 9. The stream's accepted chunk is answered in full; then the
        # stream ends with UNAVAILABLE. Its details are the server's ("...
        # resume ...", checked in-process by ShutdownTest) unless the process
        # has already exited and closed the connection before the client
        # read the trailers, when the transport reports the close (e.g.
        # "Broken pipe"): UNAVAILABLE either way, and the client resumes
        # from the last state it received.
        big = next(responses)
        self.assertEqual(big.features.shape, (BIG_STREAM_ROWS, TIME_DIM + 2))
        np.testing.assert_array_equal(big.features[:3, TIME_DIM], [30, 1, 1])
        with self.assertRaises(grpc.RpcError) as stream_end:
            next(responses)
        self.assertEqual(stream_end.exception.code(),
                         grpc.StatusCode.UNAVAILABLE)
        chunks.put(None)

        # 10. The process exits 0 well within the grace period.
        self.assertEqual(server.process.wait(timeout=GRACE_SECONDS + 10), 0,
                         server.log())
        with server.client(deadline_seconds=5) as late:
            with self.assertRaises(grpc.RpcError) as raised:
                late.encode_positions(count=1, dim=2)
            self.assertEqual(raised.exception.code(),
                             grpc.StatusCode.UNAVAILABLE)

        print(f"once all were accepted: {in_flight:.0f} calls in flight, "
              f"{BIG_CALLS - unary_done:.0f} of {BIG_CALLS} large calls "
              f"unfinished; load: {load_ok} OK, "
              f"{len(load_results) - load_ok} refused ({sorted(refused)})")
        # The stream, at least, was in flight at the signal.
        self.assertGreaterEqual(in_flight, 1)


# More slow calls than gRPC's threads run at once: 131072 x 64 float32 =
# 32 MiB per response, about 0.1 s of handler each on one kernel thread.
QUEUED_COUNT, QUEUED_DIM, QUEUED_CALLS = 131072, 64, 8
QUEUED_GRACE_SECONDS = 10
# After the last call ends the process has only to close: well under gRPC's
# 10-second poll that used to hold it, with room for a loaded machine.
EXIT_AFTER_LAST_CALL_SECONDS = 3.0
SHUTTING_DOWN = "server shutting down"


class QueuedCallsTest(unittest.TestCase):

    def test_queued_calls_are_refused_counted_and_the_process_exits(self):
        server = harness.Server([
            f"--max_message_bytes={BIG_MESSAGE_BYTES}",
            f"--shutdown_grace_seconds={QUEUED_GRACE_SECONDS}", "--threads=1",
            "--log_format=json"])
        server.start()
        self.addCleanup(server.__exit__, None, None, None)
        # No retry policy: each call ends with the status the server (or
        # its transport) sent, not with a retry's.
        client = server.client(deadline_seconds=60,
                               max_message_bytes=BIG_MESSAGE_BYTES,
                               service_config=None)
        self.addCleanup(client.close)

        def call():
            try:
                out = client.encode_positions(count=QUEUED_COUNT,
                                              dim=QUEUED_DIM)
                return "OK", "", time.monotonic(), out[[0, -1]]
            except grpc.RpcError as error:
                return (error.code().name, error.details() or "",
                        time.monotonic(), None)

        pool = concurrent.futures.ThreadPoolExecutor(QUEUED_CALLS)
        self.addCleanup(pool.shutdown)
        futures = [pool.submit(call) for _ in range(QUEUED_CALLS)]
        # The signal as soon as a handler runs: the other calls are still
        # queued for a thread then.
        deadline = time.monotonic() + 20
        started = 0
        while started < 1 and time.monotonic() < deadline:
            started = harness.metric_value(
                harness.parse_metrics(server.metrics()),
                "grpc_server_started_total", **ENCODE_POSITIONS) or 0
        self.assertGreaterEqual(started, 1, "no call started in time")
        server.send_signal()
        results = [future.result(timeout=60) for future in futures]
        last_call_ended = max(ended for _, _, ended, _ in results)
        exit_code = server.process.wait(timeout=QUEUED_GRACE_SECONDS + 20)
        exited = time.monotonic()
        self.assertEqual(exit_code, 0, server.log())

        # Every call ended OK (with the right values), or without running:
        # UNAVAILABLE from the service ("server shutting down"), from the
        # transport (it had not read the call when it stopped accepting;
        # the client may retry it anywhere), or CANCELLED by gRPC's core
        # (read, but no thread had taken it to a handler).
        codes = [code for code, _, _, _ in results]
        self.assertLessEqual(set(codes), {"OK", "UNAVAILABLE", "CANCELLED"},
                             results)
        expected_rows = reference.sinusoid(np.array([0, QUEUED_COUNT - 1]),
                                           QUEUED_DIM)
        for code, _, _, rows in results:
            if code == "OK":
                np.testing.assert_allclose(rows, expected_rows, atol=2e-6)
        ok = codes.count("OK")
        refused = sum(code == "UNAVAILABLE" and SHUTTING_DOWN in details
                      for code, details, _, _ in results)
        transport_refused = codes.count("UNAVAILABLE") - refused
        cancelled = codes.count("CANCELLED")

        # The process ends with the last call, not gRPC's poll later.
        self.assertLess(exited - last_call_ended,
                        EXIT_AFTER_LAST_CALL_SECONDS, server.log())

        # The "stopped" record accounts for every call that failed: the
        # ones the service refused and the ones gRPC's core cancelled. The
        # calls running at the signal all finished OK; nothing else ended
        # during the drain.
        [stopped] = [record for record in map(json.loads,
                                              server.log().splitlines())
                     if record["event"] == "stopped"]
        self.assertEqual(stopped["calls_refused"], refused, stopped)
        self.assertEqual(stopped["calls_unavailable"], refused, stopped)
        self.assertEqual(stopped["calls_cancelled"], 0, stopped)
        self.assertEqual(stopped["calls_not_dispatched"], cancelled, stopped)
        self.assertEqual(stopped["calls_ok"], stopped["calls_in_flight"],
                         stopped)
        self.assertEqual(stopped["calls_ended"],
                         stopped["calls_ok"] + stopped["calls_refused"],
                         stopped)
        self.assertLessEqual(stopped["calls_ok"], ok, stopped)
        print(f"{QUEUED_CALLS} calls: {ok} OK ({stopped['calls_ok']} during "
              f"the drain), {refused} refused by the service, "
              f"{transport_refused} by the transport, {cancelled} cancelled "
              f"by gRPC's core; exit {exited - last_call_ended:.2f} s after "
              f"the last call ended")
        # At least one call was still queued at the signal.
        self.assertGreaterEqual(refused + transport_refused + cancelled, 1,
                                results)


# IdleWatchTest: runs, and the longest exit after the signal allowed. The
# PING wait it guards against lasted ~4 s (up to gRPC's 20-s GOAWAY timer),
# in about 1 run of 4; an exit takes ~0.01-0.15 s.
IDLE_WATCH_RUNS = 20
IDLE_WATCH_EXIT_SECONDS = 2.0


class IdleWatchTest(unittest.TestCase):

    def test_sigterm_with_an_idle_health_watch_exits_promptly_every_time(self):
        health = _stubs.health_pb2
        exits = []
        for run in range(IDLE_WATCH_RUNS):
            server = harness.Server()
            server.start()
            self.addCleanup(server.__exit__, None, None, None)
            channel = grpc.insecure_channel(server.target)
            self.addCleanup(channel.close)
            watch = channel.unary_stream(
                "/grpc.health.v1.Health/Watch",
                request_serializer=health.HealthCheckRequest.SerializeToString,
                response_deserializer=health.HealthCheckResponse.FromString)
            updates = watch(health.HealthCheckRequest(service=""), timeout=60)
            self.assertEqual(next(updates).status,
                             health.HealthCheckResponse.SERVING)
            ended = queue.Queue()

            def read_to_the_end(updates=updates, ended=ended):
                statuses = []
                try:
                    for update in updates:
                        statuses.append(update.status)
                except grpc.RpcError as error:
                    ended.put((statuses, error.code()))
                else:
                    ended.put((statuses, grpc.StatusCode.OK))

            threading.Thread(target=read_to_the_end, daemon=True).start()
            signalled = time.monotonic()
            server.send_signal()
            exit_code = server.process.wait(timeout=30)
            exits.append(time.monotonic() - signalled)
            self.assertEqual(exit_code, 0, server.log())
            # The watcher heard NOT_SERVING, then the end of the watch.
            statuses, code = ended.get(timeout=10)
            self.assertEqual(statuses,
                             [health.HealthCheckResponse.NOT_SERVING])
            self.assertEqual(code, grpc.StatusCode.UNAVAILABLE)
            self.assertLess(exits[-1], IDLE_WATCH_EXIT_SECONDS,
                            f"run {run}: {server.log()}")
            channel.close()
        print(f"{IDLE_WATCH_RUNS} runs: exit after SIGTERM "
              f"{min(exits):.3f}-{max(exits):.3f} s")


if __name__ == "__main__":
    unittest.main(verbosity=2)
