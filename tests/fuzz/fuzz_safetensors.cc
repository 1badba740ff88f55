// libFuzzer target: the .safetensors reader (core/tensor_file.h; the header
// through nlohmann::json). The input is a whole file, read once for its only
// tensor and once for the tensor "wpe"; seeds are in corpus/safetensors/
// (gen_corpus.py).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/string_view.h"
#include "core/io/tensor_file.h"

namespace {

void Check(const absl::StatusOr<phasor::HostArray>& array) {
  if (!array.ok()) return;
  uint64_t elements = 1;
  for (const int64_t dim : array->shape) elements *= static_cast<uint64_t>(dim);
  if (elements != array->values.size()) {
    std::fprintf(stderr, "fuzz_safetensors: %zu values for the shape\n",
                 array->values.size());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  Check(phasor::ParseSafetensors(bytes, /*tensor_name=*/"", "fuzz.safetensors"));
  Check(phasor::ParseSafetensors(bytes, /*tensor_name=*/"wpe", "fuzz.safetensors"));
  return 0;
}
