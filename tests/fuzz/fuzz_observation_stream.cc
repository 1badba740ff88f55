// libFuzzer target: EncodeObservationsStream, one stream per input. The
// input is up to kMaxChunks serialized phasor.v1.EncodeObservationsRequest
// messages joined by kChunkSeparator; they go through one ObservationStream
// in order, as the chunks of one call would, so the spec fixed by the first
// message and the state carried between chunks are fuzzed too. Seeds are in
// corpus/observation_stream/ (gen_corpus.py).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "phasor/v1/encoder.pb.h"
#include "server/handlers.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

// Unlikely inside a small request; a mutation that breaks it only merges
// two chunks into one unparseable message.
constexpr absl::string_view kChunkSeparator = "\n--chunk--\n";
constexpr size_t kMaxChunks = 8;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using phasor::server::HandlerContext;
  const std::vector<absl::string_view> chunks = absl::StrSplit(
      absl::string_view(reinterpret_cast<const char*>(data), size),
      kChunkSeparator);
  if (chunks.size() > kMaxChunks) return -1;
  phasor::server::ObservationStream stream;
  for (const absl::string_view chunk : chunks) {
    phasor::v1::EncodeObservationsRequest request;
    // The server ends the stream with INVALID_ARGUMENT on a chunk it cannot
    // parse; later chunks are never read.
    if (!request.ParseFromArray(chunk.data(), static_cast<int>(chunk.size()))) {
      return 0;
    }
    phasor::v1::EncodeObservationsResponse response;
    const absl::Status status =
        phasor::fuzz::RunHandler([&](const HandlerContext& context) {
          return phasor::server::HandleEncodeObservations(context, request,
                                                          &stream, &response);
        });
    if (!status.ok()) return 0;  // The stream ends with that status.
    phasor::fuzz::CheckTensors(response);
  }
  return 0;
}
