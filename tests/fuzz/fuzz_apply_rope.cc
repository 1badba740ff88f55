// libFuzzer target: the ApplyRope RPC from request bytes to response, in
// process. The input is a serialized phasor.v1.ApplyRopeRequest; seeds are in
// corpus/apply_rope/ (gen_corpus.py).
#include <cstddef>
#include <cstdint>

#include "phasor/v1/encoder.pb.h"
#include "server/handlers.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return phasor::fuzz::FuzzUnary<phasor::v1::ApplyRopeRequest,
                                 phasor::v1::ApplyRopeResponse>(
      data, size, &phasor::server::HandleApplyRope);
}
