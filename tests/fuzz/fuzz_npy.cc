// libFuzzer target: the .npy reader (core/tensor_file.h), which loads
// profile tables on the server and every .npy file phasor-client reads. The
// input is a whole file; seeds are in corpus/npy/ (gen_corpus.py).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/string_view.h"
#include "core/adapters/dtype.h"
#include "core/io/tensor_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  const auto npy = phasor::ParseNpyArray(bytes, "fuzz.npy");
  const auto table = phasor::ParseNpy(bytes, "fuzz.npy");
  if (npy.ok()) {
    // The view covers the data exactly and lies inside the input.
    if (npy->data.size() !=
            static_cast<uint64_t>(npy->num_elements) * phasor::DTypeSize(npy->dtype) ||
        npy->data.data() < bytes.data() ||
        npy->data.data() + npy->data.size() != bytes.data() + bytes.size()) {
      std::fprintf(stderr, "fuzz_npy: data view does not match the shape\n");
      std::abort();
    }
  }
  const bool floating = npy.ok() && (npy->dtype == phasor::DType::kFloat16 ||
                                     npy->dtype == phasor::DType::kFloat32 ||
                                     npy->dtype == phasor::DType::kFloat64);
  if (table.ok() != floating ||
      (table.ok() && static_cast<int64_t>(table->values.size()) != npy->num_elements)) {
    std::fprintf(stderr, "fuzz_npy: ParseNpy and ParseNpyArray disagree\n");
    std::abort();
  }
  return 0;
}
