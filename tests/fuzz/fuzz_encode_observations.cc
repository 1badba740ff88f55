// libFuzzer target: the unary EncodeObservations RPC from request bytes to
// response, in process. The input is a serialized
// phasor.v1.EncodeObservationsRequest; seeds are in
// corpus/encode_observations/ (gen_corpus.py).
#include <cstddef>
#include <cstdint>

#include "phasor/v1/encoder.pb.h"
#include "server/handlers.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return phasor::fuzz::FuzzUnary<phasor::v1::EncodeObservationsRequest,
                                 phasor::v1::EncodeObservationsResponse>(
      data, size,
      [](const phasor::server::HandlerContext& context,
         const phasor::v1::EncodeObservationsRequest& request,
         phasor::v1::EncodeObservationsResponse* response) {
        return phasor::server::HandleEncodeObservations(
            context, request, /*stream=*/nullptr, response);
      });
}
