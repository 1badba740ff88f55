// Shared set-up of the libFuzzer targets that drive server/handlers.h
// in-process: one ProfileRegistry built from tests/data (a learned table, a
// rope profile, a temporal profile with Time2Vec parameters and a holiday
// calendar), and a HandlerContext with one thread and limits well below the
// server's defaults, so each input stays cheap and the fuzzer stays fast.
//
// Thread-safety: libFuzzer calls a target from one thread; Profiles() is
// built once on first use.
#ifndef PHASOR_TESTS_FUZZ_FUZZ_UTIL_H_
#define PHASOR_TESTS_FUZZ_FUZZ_UTIL_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "google/protobuf/message.h"
#include "server/handlers.h"
#include "server/profiles.h"

namespace phasor::fuzz {

// The fuzzers' profiles: "wpe" (learned, 5 rows x 4), "rope" (rotary_dim 4),
// "vitals" (temporal: time, gaps, calendar in Europe/Paris); Time2Vec set
// "t2v" and holiday calendar "demo". Aborts if tests/data cannot be read:
// that is a broken build, not a finding.
const server::ProfileRegistry& Profiles();

// The server's caches (server/server_caches.h), shared by every input as
// the server shares them between calls, so the fuzzers reach the cached paths too (an
// input may hit an entry an earlier one left; a crash that needs one
// replays with both inputs).
server::ServerCaches& Caches();

// Runs `handler(const server::HandlerContext&)` with the fuzzers' context:
// Profiles(), 1 thread, max_elements 2^16, max_message_bytes 1 MiB, no
// metrics, a call that is always still wanted, Caches().
template <typename Handler>
absl::Status RunHandler(Handler&& handler) {
  const auto alive = [] { return absl::OkStatus(); };
  server::RequestLimits limits;
  limits.max_elements = int64_t{1} << 16;
  limits.max_message_bytes = int64_t{1} << 20;
  ExecutionOptions execution;
  execution.max_threads = 1;
  server::HandlerContext context{&Profiles(), execution, limits,
                                 /*metrics=*/nullptr, alive};
  context.caches = &Caches();
  return handler(static_cast<const server::HandlerContext&>(context));
}

// Aborts (a finding) unless every phasor.v1.Tensor inside `message`, at
// any depth, is empty or has data of exactly product(shape) * sizeof(dtype)
// bytes: a handler that answers OK must not answer with a torn tensor.
void CheckTensors(const google::protobuf::Message& message);

// The fuzz input parsed as a `Request`, run through `handle(context,
// request, &response)`; the response's tensors are checked when it returns
// OK. Returns -1 (libFuzzer: do not keep the input) when the bytes do not
// parse, as gRPC would refuse them before any handler runs.
template <typename Request, typename Response, typename Handle>
int FuzzUnary(const uint8_t* data, size_t size, Handle handle) {
  Request request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return -1;
  Response response;
  const absl::Status status = RunHandler([&](const server::HandlerContext& context) {
    return handle(context, request, &response);
  });
  if (status.ok()) CheckTensors(response);
  return 0;
}

}  // namespace phasor::fuzz

#endif  // PHASOR_TESTS_FUZZ_FUZZ_UTIL_H_
