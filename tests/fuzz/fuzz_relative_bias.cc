// libFuzzer target: the RelativeBias RPC from request bytes to response, in
// process. The input is a serialized phasor.v1.RelativeBiasRequest; seeds are in
// corpus/relative_bias/ (gen_corpus.py).
#include <cstddef>
#include <cstdint>

#include "phasor/v1/encoder.pb.h"
#include "server/handlers.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return phasor::fuzz::FuzzUnary<phasor::v1::RelativeBiasRequest,
                                 phasor::v1::RelativeBiasResponse>(
      data, size, &phasor::server::HandleRelativeBias);
}
