// Helpers shared by the Google Benchmark programs in bench/.
//
// Inputs are a deterministic function of the element index, spelled the same
// way in bench/peers/common.py, so the C++ benchmarks and the Python peers
// time the same numbers and the check step can compare their outputs:
//   value(i) = float(((i · 2654435761) mod 2^32) / 2^32 · 2 − 1)
// (Knuth's multiplicative hash; uniform enough on [−1, 1) for timing, exact
// in double on both sides before the one rounding to float).
//
// Flags every bench program understands, before Google Benchmark's own:
//   --phasor_threads=1,2   thread budgets (ExecutionOptions::max_threads)
//   --phasor_dump=DIR      write the outputs of the check configurations as
//                          raw little-endian files into DIR and exit
//   --phasor_sizes=small   only the sizes the check step and CI need
//   --phasor_max_target=AVX2
//                          dispatch the core's kernels to that Highway target
//                          at best (hwy::TargetName spelling), as on a host
//                          without the better ones: an AVX-512 machine
//                          measures its AVX2 code
//
// Thread-safety: not applicable (single-threaded set-up code).
#ifndef PHASOR_BENCH_BENCH_COMMON_H_
#define PHASOR_BENCH_BENCH_COMMON_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "benchmark/benchmark.h"
#include "hwy/targets.h"

namespace phasor::bench {

inline float InputValue(uint64_t i) {
  const uint64_t hashed = (i * uint64_t{2654435761}) & uint64_t{0xffffffff};
  return static_cast<float>(static_cast<double>(hashed) / 4294967296.0 * 2.0 - 1.0);
}

inline void FillInputs(float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = InputValue(static_cast<uint64_t>(i));
}

struct BenchFlags {
  std::vector<int> threads = {1, 2};
  std::string dump_dir;  // Empty: run benchmarks.
  bool small_only = false;
};

// Consumes the --phasor_* flags from argv (Google Benchmark rejects unknown
// flags) and returns them.
inline BenchFlags ParseBenchFlags(int* argc, char** argv) {
  BenchFlags flags;
  int kept = 1;
  for (int i = 1; i < *argc; ++i) {
    absl::string_view arg = argv[i];
    if (absl::ConsumePrefix(&arg, "--phasor_threads=")) {
      flags.threads.clear();
      for (absl::string_view part : absl::StrSplit(arg, ',')) {
        int n = 0;
        if (!absl::SimpleAtoi(part, &n) || n < 1) {
          std::fprintf(stderr, "bad --phasor_threads value: %s\n", argv[i]);
          std::exit(2);
        }
        flags.threads.push_back(n);
      }
    } else if (absl::ConsumePrefix(&arg, "--phasor_dump=")) {
      flags.dump_dir = std::string(arg);
    } else if (arg == "--phasor_sizes=small") {
      flags.small_only = true;
    } else if (absl::ConsumePrefix(&arg, "--phasor_max_target=")) {
      // Highway numbers x86 targets better-first: bit 1 << k beats 1 << (k + 1).
      int64_t chosen = 0;
      for (int bit = 0; bit < 63; ++bit) {
        const int64_t target = int64_t{1} << bit;
        if (arg == hwy::TargetName(target)) chosen = target;
      }
      const int64_t allowed = hwy::SupportedTargets() & ~(chosen - 1);
      if (chosen == 0 || (allowed & chosen) == 0) {
        std::fprintf(stderr, "--phasor_max_target: %s is not a Highway target of this host\n",
                     argv[i]);
        std::exit(2);
      }
      hwy::SetSupportedTargetsForTest(allowed);
    } else {
      argv[kept++] = argv[i];
    }
  }
  *argc = kept;
  return flags;
}

// Writes `bytes` bytes to DIR/name; exits on failure (bench set-up only).
inline void WriteRaw(const std::string& dir, const std::string& name,
                     const void* data, size_t bytes) {
  const std::string path = dir + "/" + name;
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr || std::fwrite(data, 1, bytes, file) != bytes) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    std::exit(1);
  }
  std::fclose(file);
}

// The main() of every bench program: consume the --phasor_* flags, then
// either dump the check outputs or register and run the benchmarks.
inline int RunBenchmarkMain(int argc, char** argv,
                            void (*dump)(const std::string& dir),
                            void (*register_all)(const BenchFlags& flags)) {
  const BenchFlags flags = ParseBenchFlags(&argc, argv);
  if (!flags.dump_dir.empty()) {
    dump(flags.dump_dir);
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  register_all(flags);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace phasor::bench

#endif  // PHASOR_BENCH_BENCH_COMMON_H_
