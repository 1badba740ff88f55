// Tests for core/rope/rope_scaling.h through the RopeSpec entry points of
// core/rope/rope.h: every scaling variant against values computed independently by
// tests/data/gen_rope_expected.py (torch, float64), plus every validation path.
#include "core/rope/rope_scaling.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "core/base/errors.h"
#include "core/base/positions.h"
#include "core/rope/rope.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/quad_reference.h"
#include "tests/status_matchers.h"

namespace phasor {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// ---------------------------------------------------------------------------
// tests/data/rope_expected.txt

struct Trig {
  int64_t position;
  int64_t index;
  double cos;
  double sin;
};

struct ExpectedCase {
  std::string name;
  int64_t rotary_dim = 0;
  double base = 0;
  std::string type;
  std::map<std::string, std::string> fields;
  int64_t seq_len = 0;
  double attention_factor = 0;
  std::vector<double> inv_freq;
  std::vector<Trig> trig;
};

double ParseDouble(const std::string& text) {
  double value = 0;
  EXPECT_TRUE(absl::SimpleAtod(text, &value)) << text;
  return value;
}

int64_t ParseInt(const std::string& text) {
  int64_t value = 0;
  EXPECT_TRUE(absl::SimpleAtoi(text, &value)) << text;
  return value;
}

std::vector<ExpectedCase> LoadCases() {
  std::vector<ExpectedCase> cases;
  std::ifstream file(std::string(PHASOR_TEST_DATA_DIR) + "/rope_expected.txt");
  std::string line;
  ExpectedCase current;
  while (std::getline(file, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string key;
    in >> key;
    if (key == "case") {
      current = ExpectedCase();
      in >> current.name;
    } else if (key == "rotary_dim") {
      in >> current.rotary_dim;
    } else if (key == "base") {
      std::string text;
      in >> text;
      current.base = ParseDouble(text);
    } else if (key == "scaling") {
      in >> current.type;
      std::string pair;
      while (in >> pair) {
        const std::vector<std::string> kv = absl::StrSplit(pair, '=');
        if (kv.size() == 2) current.fields[kv[0]] = kv[1];
      }
    } else if (key == "seq_len") {
      in >> current.seq_len;
    } else if (key == "attention_factor") {
      std::string text;
      in >> text;
      current.attention_factor = ParseDouble(text);
    } else if (key == "inv_freq") {
      std::string text;
      while (in >> text) current.inv_freq.push_back(ParseDouble(text));
    } else if (key == "trig") {
      Trig trig;
      std::string c, s;
      in >> trig.position >> trig.index >> c >> s;
      trig.cos = ParseDouble(c);
      trig.sin = ParseDouble(s);
      current.trig.push_back(trig);
    } else if (key == "end") {
      cases.push_back(current);
    }
  }
  return cases;
}

// Names the case in test output instead of dumping its bytes.
void PrintTo(const ExpectedCase& c, std::ostream* os) { *os << c.name; }

const std::vector<ExpectedCase>& Cases() {
  static const std::vector<ExpectedCase>* cases =
      new std::vector<ExpectedCase>(LoadCases());
  return *cases;
}

std::optional<double> OptionalDouble(const ExpectedCase& c, const std::string& key) {
  auto it = c.fields.find(key);
  if (it == c.fields.end()) return std::nullopt;
  return ParseDouble(it->second);
}
std::optional<int64_t> OptionalInt(const ExpectedCase& c, const std::string& key) {
  auto it = c.fields.find(key);
  if (it == c.fields.end()) return std::nullopt;
  return ParseInt(it->second);
}
std::vector<double> DoubleList(const ExpectedCase& c, const std::string& key) {
  std::vector<double> values;
  auto it = c.fields.find(key);
  if (it == c.fields.end()) return values;
  for (absl::string_view part : absl::StrSplit(it->second, ',')) {
    values.push_back(ParseDouble(std::string(part)));
  }
  return values;
}

RopeSpec SpecFor(const ExpectedCase& c) {
  RopeSpec spec;
  spec.rotary_dim = c.rotary_dim;
  spec.base = c.base;
  if (c.type == "default") {
    spec.scaling = NoRopeScaling{};
  } else if (c.type == "linear") {
    spec.scaling = LinearRopeScaling{*OptionalDouble(c, "factor")};
  } else if (c.type == "ntk") {
    spec.scaling = NtkRopeScaling{*OptionalDouble(c, "factor")};
  } else if (c.type == "dynamic") {
    spec.scaling = DynamicNtkRopeScaling{*OptionalDouble(c, "factor"),
                                         *OptionalInt(c, "max_position_embeddings")};
  } else if (c.type == "yarn") {
    YarnRopeScaling yarn;
    yarn.factor = OptionalDouble(c, "factor");
    yarn.original_max_position_embeddings =
        OptionalInt(c, "original_max_position_embeddings");
    yarn.max_position_embeddings = OptionalInt(c, "max_position_embeddings");
    if (auto v = OptionalDouble(c, "beta_fast")) yarn.beta_fast = *v;
    if (auto v = OptionalDouble(c, "beta_slow")) yarn.beta_slow = *v;
    yarn.mscale = OptionalDouble(c, "mscale");
    yarn.mscale_all_dim = OptionalDouble(c, "mscale_all_dim");
    yarn.attention_factor = OptionalDouble(c, "attention_factor");
    if (auto v = OptionalInt(c, "truncate")) yarn.truncate = *v != 0;
    spec.scaling = yarn;
  } else if (c.type == "longrope") {
    LongRopeScaling longrope;
    longrope.short_factor = DoubleList(c, "short_factor");
    longrope.long_factor = DoubleList(c, "long_factor");
    longrope.original_max_position_embeddings =
        OptionalInt(c, "original_max_position_embeddings");
    longrope.max_position_embeddings = OptionalInt(c, "max_position_embeddings");
    longrope.factor = OptionalDouble(c, "factor");
    longrope.attention_factor = OptionalDouble(c, "attention_factor");
    spec.scaling = longrope;
  } else if (c.type == "llama3") {
    Llama3RopeScaling llama3;
    llama3.factor = *OptionalDouble(c, "factor");
    if (auto v = OptionalDouble(c, "low_freq_factor")) llama3.low_freq_factor = *v;
    if (auto v = OptionalDouble(c, "high_freq_factor")) llama3.high_freq_factor = *v;
    if (auto v = OptionalInt(c, "original_max_position_embeddings")) {
      llama3.original_max_position_embeddings = *v;
    }
    spec.scaling = llama3;
  } else if (c.type == "proportional") {
    ProportionalRopeScaling proportional;
    if (auto v = OptionalDouble(c, "factor")) proportional.factor = *v;
    if (auto v = OptionalDouble(c, "partial_rotary_factor")) {
      proportional.partial_rotary_factor = *v;
    }
    spec.scaling = proportional;
  } else {
    ADD_FAILURE() << "unknown scaling type " << c.type;
  }
  return spec;
}

TEST(RopeExpectedFile, CoversEveryScalingType) {
  const std::vector<ExpectedCase>& cases = Cases();
  ASSERT_GE(cases.size(), 20u) << "tests/data/rope_expected.txt missing or short";
  std::set<std::string> types;
  for (const ExpectedCase& c : cases) {
    types.insert(c.type);
    EXPECT_EQ(static_cast<int64_t>(c.inv_freq.size()), c.rotary_dim / 2) << c.name;
    EXPECT_FALSE(c.trig.empty()) << c.name;
  }
  EXPECT_EQ(types, (std::set<std::string>{"default", "linear", "ntk", "dynamic",
                                           "yarn", "longrope", "llama3",
                                           "proportional"}));
}

class RopeScalingExpected : public ::testing::TestWithParam<ExpectedCase> {};

TEST_P(RopeScalingExpected, FrequenciesAttentionFactorAndTables) {
  const ExpectedCase& c = GetParam();
  const RopeSpec spec = SpecFor(c);
  EXPECT_EQ(RopeScalingName(spec.scaling), c.type);
  const absl::StatusOr<RopeFrequencies> frequencies =
      ComputeRopeFrequencies(spec, /*head_dim=*/c.rotary_dim, c.seq_len);
  ASSERT_TRUE(frequencies.ok()) << frequencies.status();
  ASSERT_EQ(frequencies->inv_freq.size(), c.inv_freq.size());
  for (size_t i = 0; i < c.inv_freq.size(); ++i) {
    EXPECT_NEAR(frequencies->inv_freq[i], c.inv_freq[i], 1e-12 * c.inv_freq[i])
        << c.name << " inv_freq[" << i << "]";
  }
  EXPECT_NEAR(frequencies->attention_factor, c.attention_factor, 1e-12)
      << c.name;

  // cos/sin with the attention factor folded, at the generator's positions.
  std::vector<int64_t> positions;
  for (const Trig& t : c.trig) positions.push_back(t.position);
  const int64_t width = RopeTableWidth(spec, c.rotary_dim);
  std::vector<float> cos(positions.size() * width), sin(positions.size() * width);
  const Positions pos = Positions::Integers(positions);
  ASSERT_TRUE(ValidateRopePositions(pos, *frequencies).ok());
  ComputeRopeTables(*frequencies, /*fold_attention_factor=*/true, pos,
                    ExecutionOptions(), absl::MakeSpan(cos), absl::MakeSpan(sin));
  for (size_t n = 0; n < c.trig.size(); ++n) {
    const Trig& t = c.trig[n];
    // One float rounding of a value of magnitude <= attention factor.
    const double tolerance = 1e-7 * std::max(1.0, c.attention_factor);
    EXPECT_NEAR(cos[n * width + t.index], t.cos, tolerance)
        << c.name << " cos at p=" << t.position << " i=" << t.index;
    EXPECT_NEAR(sin[n * width + t.index], t.sin, tolerance)
        << c.name << " sin at p=" << t.position << " i=" << t.index;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Generated, RopeScalingExpected, ::testing::ValuesIn(Cases()),
    [](const ::testing::TestParamInfo<ExpectedCase>& info) {
      return info.param.name;
    });

// ---------------------------------------------------------------------------
// Semantics worth pinning on their own.

RopeFrequencies MustCompute(const RopeSpec& spec, int64_t head_dim,
                            int64_t seq_len) {
  absl::StatusOr<RopeFrequencies> result =
      ComputeRopeFrequencies(spec, head_dim, seq_len);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *result : RopeFrequencies();
}

TEST(RopeScaling, PlainFrequenciesFollowTheFormula) {
  RopeSpec spec;
  spec.base = 10000.0;
  const RopeFrequencies f = MustCompute(spec, 8, 1);
  ASSERT_EQ(f.inv_freq.size(), 4u);
  // 10000^(-2i/8) = 10^(-i): 1, 0.1, 0.01, 0.001.
  EXPECT_DOUBLE_EQ(f.inv_freq[0], 1.0);
  EXPECT_NEAR(f.inv_freq[1], 0.1, 1e-16);
  EXPECT_NEAR(f.inv_freq[2], 0.01, 1e-17);
  EXPECT_NEAR(f.inv_freq[3], 0.001, 1e-18);
  EXPECT_EQ(f.attention_factor, 1.0);
}

TEST(RopeScaling, DynamicBelowOriginalLengthIsPlainRope) {
  RopeSpec plain;
  RopeSpec dynamic;
  dynamic.scaling = DynamicNtkRopeScaling{/*factor=*/4.0,
                                          /*max_position_embeddings=*/2048};
  for (int64_t seq_len : {1, 100, 2048}) {
    EXPECT_EQ(MustCompute(dynamic, 64, seq_len).inv_freq,
              MustCompute(plain, 64, 1).inv_freq)
        << seq_len;
  }
  // Above L0 the lowest frequency must drop.
  EXPECT_LT(MustCompute(dynamic, 64, 2049).inv_freq.back(),
            MustCompute(plain, 64, 1).inv_freq.back());
}

TEST(RopeScaling, YarnFactorDefaultsToContextRatioOnlyWhenAbsent) {
  YarnRopeScaling implicit;
  implicit.original_max_position_embeddings = 4096;
  implicit.max_position_embeddings = 16384;
  YarnRopeScaling explicit_factor = implicit;
  explicit_factor.factor = 4.0;
  RopeSpec a, b;
  a.scaling = implicit;
  b.scaling = explicit_factor;
  const RopeFrequencies fa = MustCompute(a, 64, 1);
  const RopeFrequencies fb = MustCompute(b, 64, 1);
  EXPECT_EQ(fa.inv_freq, fb.inv_freq);
  EXPECT_EQ(fa.attention_factor, fb.attention_factor);
  EXPECT_NEAR(fa.attention_factor, 0.1 * std::log(4.0) + 1.0, 1e-15);

  // A present factor wins over the ratio (16384/4096 = 4).
  YarnRopeScaling overridden = implicit;
  overridden.factor = 2.0;
  RopeSpec c;
  c.scaling = overridden;
  EXPECT_NEAR(MustCompute(c, 64, 1).attention_factor, 0.1 * std::log(2.0) + 1.0,
              1e-15);
}

TEST(RopeScaling, YarnZeroMscaleCountsAsAbsentLikeHf) {
  YarnRopeScaling yarn;
  yarn.factor = 16.0;
  yarn.original_max_position_embeddings = 4096;
  yarn.mscale = 0.0;  // HF: `if mscale and mscale_all_dim` is false.
  yarn.mscale_all_dim = 1.0;
  RopeSpec spec;
  spec.scaling = yarn;
  EXPECT_NEAR(MustCompute(spec, 64, 1).attention_factor,
              0.1 * std::log(16.0) + 1.0, 1e-15);
}

TEST(RopeScaling, YarnExtremesAreThetaAndThetaOverFactor) {
  YarnRopeScaling yarn;
  yarn.factor = 8.0;
  yarn.original_max_position_embeddings = 4096;
  RopeSpec yarn_spec, plain;
  yarn_spec.scaling = yarn;
  const RopeFrequencies scaled = MustCompute(yarn_spec, 128, 1);
  const RopeFrequencies base = MustCompute(plain, 128, 1);
  // Highest frequency: extrapolated (unchanged); lowest: interpolated (/8).
  EXPECT_EQ(scaled.inv_freq.front(), base.inv_freq.front());
  EXPECT_NEAR(scaled.inv_freq.back(), base.inv_freq.back() / 8.0,
              1e-15 * base.inv_freq.back());
}

TEST(RopeScaling, LongRopeSwitchesFactorsStrictlyAboveOriginal) {
  LongRopeScaling longrope;
  longrope.short_factor = {1.0, 2.0};
  longrope.long_factor = {4.0, 8.0};
  longrope.original_max_position_embeddings = 100;
  longrope.factor = 1.0;  // Attention factor 1.
  RopeSpec spec;
  spec.scaling = longrope;
  const RopeFrequencies at = MustCompute(spec, 4, 100);
  const RopeFrequencies above = MustCompute(spec, 4, 101);
  // θ = (1, 10000^-0.5 = 0.01).
  EXPECT_DOUBLE_EQ(at.inv_freq[0], 1.0);
  EXPECT_DOUBLE_EQ(at.inv_freq[1], 0.01 / 2.0);
  EXPECT_DOUBLE_EQ(above.inv_freq[0], 1.0 / 4.0);
  EXPECT_DOUBLE_EQ(above.inv_freq[1], 0.01 / 8.0);
  EXPECT_EQ(at.attention_factor, 1.0);
}

// Lengths in one bucket give the same frequencies, bit for bit; the buckets
// change only where the frequencies do.
TEST(RopeScaling, SeqLenBucketsTellWhatTheFrequenciesRead) {
  LongRopeScaling longrope;
  longrope.short_factor = {1.0, 2.0};
  longrope.long_factor = {4.0, 8.0};
  longrope.max_position_embeddings = 100;
  longrope.factor = 1.0;
  const RopeScaling scalings[] = {
      NoRopeScaling{}, LinearRopeScaling{/*factor=*/2.0},
      DynamicNtkRopeScaling{/*factor=*/4.0, /*max_position_embeddings=*/64}, longrope};
  for (const RopeScaling& scaling : scalings) {
    RopeSpec spec;
    spec.scaling = scaling;
    for (int64_t a : {1, 63, 64, 65, 99, 100, 101, 1000}) {
      for (int64_t b : {1, 64, 100, 101, 1000}) {
        if (RopeSeqLenBucket(scaling, a) != RopeSeqLenBucket(scaling, b)) continue;
        const RopeFrequencies fa = MustCompute(spec, 4, a);
        const RopeFrequencies fb = MustCompute(spec, 4, b);
        EXPECT_EQ(fa.inv_freq, fb.inv_freq) << RopeScalingName(scaling) << a << " " << b;
        EXPECT_EQ(fa.attention_factor, fb.attention_factor);
      }
    }
  }
  EXPECT_EQ(RopeSeqLenBucket(LinearRopeScaling{2.0}, 5000), 0);
  EXPECT_EQ(RopeSeqLenBucket(scalings[2], 10), 64);
  EXPECT_EQ(RopeSeqLenBucket(scalings[2], 65), 65);
  EXPECT_EQ(RopeSeqLenBucket(longrope, 100), 0);
  EXPECT_EQ(RopeSeqLenBucket(longrope, 101), 1);
  longrope.original_max_position_embeddings = 50;  // Wins over max_position_embeddings.
  EXPECT_EQ(RopeSeqLenBucket(longrope, 51), 1);
}

TEST(RopeScaling, Llama3BandsByWavelength) {
  Llama3RopeScaling llama3;  // low 1, high 4, original 8192 by default.
  llama3.factor = 8.0;
  RopeSpec spec, plain;
  spec.base = plain.base = 500000.0;
  spec.scaling = llama3;
  const RopeFrequencies scaled = MustCompute(spec, 128, 1);
  const RopeFrequencies base = MustCompute(plain, 128, 1);
  int kept = 0, divided = 0, blended = 0;
  for (size_t i = 0; i < base.inv_freq.size(); ++i) {
    const double wavelength = 2 * M_PI / base.inv_freq[i];
    if (wavelength < 8192.0 / 4.0) {
      EXPECT_EQ(scaled.inv_freq[i], base.inv_freq[i]) << i;
      ++kept;
    } else if (wavelength > 8192.0) {
      EXPECT_NEAR(scaled.inv_freq[i], base.inv_freq[i] / 8.0,
                  1e-15 * base.inv_freq[i]) << i;
      ++divided;
    } else {
      EXPECT_LT(scaled.inv_freq[i], base.inv_freq[i]) << i;
      EXPECT_GT(scaled.inv_freq[i], base.inv_freq[i] / 8.0) << i;
      ++blended;
    }
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(divided, 0);
  EXPECT_GT(blended, 0);
}

TEST(RopeScaling, Names) {
  EXPECT_EQ(RopeScalingName(NoRopeScaling{}), "default");
  EXPECT_EQ(RopeScalingName(LinearRopeScaling{}), "linear");
  EXPECT_EQ(RopeScalingName(NtkRopeScaling{}), "ntk");
  EXPECT_EQ(RopeScalingName(DynamicNtkRopeScaling{}), "dynamic");
  EXPECT_EQ(RopeScalingName(YarnRopeScaling{}), "yarn");
  EXPECT_EQ(RopeScalingName(LongRopeScaling{}), "longrope");
  EXPECT_EQ(RopeScalingName(Llama3RopeScaling{}), "llama3");
}

// ---------------------------------------------------------------------------
// Validation: every error path, with its code and field path.

struct BadScaling {
  std::string label;
  RopeScaling scaling;
  int64_t rotary_dim;
  double base;
  std::string field;
};

YarnRopeScaling GoodYarn() {
  YarnRopeScaling yarn;
  yarn.factor = 4.0;
  yarn.original_max_position_embeddings = 4096;
  return yarn;
}

Llama3RopeScaling GoodLlama3() {
  Llama3RopeScaling llama3;
  llama3.factor = 8.0;
  return llama3;
}

LongRopeScaling GoodLongRope(int64_t rotary_dim) {
  LongRopeScaling longrope;
  longrope.short_factor.assign(rotary_dim / 2, 1.0);
  longrope.long_factor.assign(rotary_dim / 2, 2.0);
  longrope.original_max_position_embeddings = 4096;
  longrope.max_position_embeddings = 131072;
  return longrope;
}

template <class T, class F>
T With(T value, F mutate) {
  mutate(value);
  return value;
}

// ---------------------------------------------------------------------------
// Configurations HF main accepts with only a warning. Expected
// values come from the published formulas written out here in double,
// independently of core/: HF transformers src/transformers/modeling_rope_utils.py
// (main), `_compute_linear_scaling_rope_parameters`,
// `_compute_dynamic_ntk_parameters`, `_compute_yarn_parameters` (its
// find_correction_dim / find_correction_range / linear_ramp_factor /
// get_mscale), `_compute_longrope_parameters`, `_compute_llama3_parameters`;
// the warnings are in `RotaryEmbeddingConfigMixin._validate_*_rope_parameters`.

std::vector<double> ReferenceTheta(double base, int64_t rotary_dim) {
  std::vector<double> theta;
  for (int64_t i = 0; i < rotary_dim / 2; ++i) {
    theta.push_back(std::pow(base, -2.0 * static_cast<double>(i) /
                                       static_cast<double>(rotary_dim)));
  }
  return theta;
}

// YaRN eq. 17 / HF find_correction_dim.
double ReferenceCorrectionDim(double rotations, int64_t rotary_dim, double base,
                              double context) {
  return static_cast<double>(rotary_dim) *
         std::log(context / (rotations * 2.0 * M_PI)) / (2.0 * std::log(base));
}

std::vector<double> ReferenceYarn(double base, int64_t rotary_dim, double factor,
                                  double context, double beta_fast,
                                  double beta_slow, bool truncate) {
  double low = ReferenceCorrectionDim(beta_fast, rotary_dim, base, context);
  double high = ReferenceCorrectionDim(beta_slow, rotary_dim, base, context);
  if (truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(rotary_dim - 1));
  if (low == high) high += 0.001;  // HF linear_ramp_factor's singular guard.
  std::vector<double> theta = ReferenceTheta(base, rotary_dim);
  for (size_t i = 0; i < theta.size(); ++i) {
    const double ramp =
        std::min(1.0, std::max(0.0, (static_cast<double>(i) - low) / (high - low)));
    theta[i] = theta[i] / factor * ramp + theta[i] * (1.0 - ramp);
  }
  return theta;
}

std::vector<double> ReferenceLlama3(double base, int64_t rotary_dim, double factor,
                                    double low_freq_factor, double high_freq_factor,
                                    double context) {
  std::vector<double> theta = ReferenceTheta(base, rotary_dim);
  for (double& t : theta) {
    const double wavelength = 2.0 * M_PI / t;
    if (wavelength > context / low_freq_factor) {
      t /= factor;
    } else if (wavelength >= context / high_freq_factor) {
      const double smooth = (context / wavelength - low_freq_factor) /
                            (high_freq_factor - low_freq_factor);
      t = (1.0 - smooth) * t / factor + smooth * t;
    }
  }
  return theta;
}

void ExpectFrequenciesNear(const std::vector<double>& actual,
                           const std::vector<double>& expected,
                           const std::string& label) {
  ASSERT_EQ(actual.size(), expected.size()) << label;
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], 1e-14 * expected[i]) << label << " i=" << i;
  }
}

TEST(HfWarnsPhasorAccepts, LinearFactorBelowOne) {
  RopeSpec spec;
  spec.scaling = LinearRopeScaling{0.5};
  std::vector<double> expected = ReferenceTheta(1e4, 64);
  for (double& t : expected) t /= 0.5;
  ExpectFrequenciesNear(MustCompute(spec, 64, 1).inv_freq, expected, "linear 0.5");
}

TEST(HfWarnsPhasorAccepts, DynamicFactorBelowOne) {
  RopeSpec spec;
  spec.scaling = DynamicNtkRopeScaling{/*factor=*/0.5,
                                       /*max_position_embeddings=*/2048};
  // L = 4096: base' = base·(0.5·4096/2048 − (0.5 − 1))^(64/62).
  const double scaled_base = 1e4 * std::pow(0.5 * 2.0 + 0.5, 64.0 / 62.0);
  ExpectFrequenciesNear(MustCompute(spec, 64, 4096).inv_freq,
                        ReferenceTheta(scaled_base, 64), "dynamic 0.5");
}

TEST(HfWarnsPhasorAccepts, YarnEqualBetasUntruncatedHitTheSingularGuard) {
  YarnRopeScaling yarn = GoodYarn();  // factor 4, original 4096.
  yarn.beta_fast = yarn.beta_slow = 8.0;
  yarn.truncate = false;
  RopeSpec spec;
  spec.scaling = yarn;
  const RopeFrequencies frequencies = MustCompute(spec, 64, 1);
  ExpectFrequenciesNear(frequencies.inv_freq,
                        ReferenceYarn(1e4, 64, 4.0, 4096, 8, 8, false), "yarn");
  // low = high = d(8) ≈ 15.3, so the ramp is a step: θ up to pair 15, θ/4 after.
  const double d = ReferenceCorrectionDim(8.0, 64, 1e4, 4096);
  ASSERT_GT(d, 15.0);
  ASSERT_LT(d, 16.0);
  const std::vector<double> theta = ReferenceTheta(1e4, 64);
  for (size_t i = 0; i < theta.size(); ++i) {
    EXPECT_NEAR(frequencies.inv_freq[i], i <= 15 ? theta[i] : theta[i] / 4.0,
                1e-14 * theta[i])
        << i;
  }
  EXPECT_NEAR(frequencies.attention_factor, 0.1 * std::log(4.0) + 1.0, 1e-15);
}

TEST(HfWarnsPhasorAccepts, YarnEqualBetasTruncatedClampToOneDimension) {
  // beta = 1.01·L0/(2π) puts both correction dimensions in (−1, 0): floor and
  // ceil give 0 and 0, where a stricter check would say "must be > beta_slow".
  const double beta = 1.01 * 4096.0 / (2.0 * M_PI);
  YarnRopeScaling yarn = GoodYarn();
  yarn.beta_fast = yarn.beta_slow = beta;
  RopeSpec spec;
  spec.scaling = yarn;
  const double d = ReferenceCorrectionDim(beta, 64, 1e4, 4096);
  ASSERT_GT(d, -1.0);
  ASSERT_LT(d, 0.0);
  const RopeFrequencies frequencies = MustCompute(spec, 64, 1);
  ExpectFrequenciesNear(frequencies.inv_freq,
                        ReferenceYarn(1e4, 64, 4.0, 4096, beta, beta, true), "yarn");
  const std::vector<double> theta = ReferenceTheta(1e4, 64);
  EXPECT_EQ(frequencies.inv_freq[0], theta[0]);
  EXPECT_NEAR(frequencies.inv_freq[1], theta[1] / 4.0, 1e-14 * theta[1]);
}

TEST(HfWarnsPhasorAccepts, YarnEqualBetasTruncatedOneDimensionApart) {
  YarnRopeScaling yarn = GoodYarn();
  yarn.beta_fast = yarn.beta_slow = 8.0;
  RopeSpec spec;
  spec.scaling = yarn;
  ExpectFrequenciesNear(MustCompute(spec, 64, 1).inv_freq,
                        ReferenceYarn(1e4, 64, 4.0, 4096, 8, 8, true), "yarn");
}

TEST(HfWarnsPhasorAccepts, YarnBetaFastBelowBetaSlowRampsDownwards) {
  YarnRopeScaling yarn = GoodYarn();
  yarn.beta_fast = 1.0;
  yarn.beta_slow = 32.0;
  RopeSpec spec;
  spec.scaling = yarn;
  const RopeFrequencies frequencies = MustCompute(spec, 128, 1);
  ExpectFrequenciesNear(frequencies.inv_freq,
                        ReferenceYarn(1e4, 128, 4.0, 4096, 1, 32, true), "yarn");
  // Reversed: the highest frequency is now interpolated, the lowest kept.
  const std::vector<double> theta = ReferenceTheta(1e4, 128);
  EXPECT_NEAR(frequencies.inv_freq.front(), theta.front() / 4.0, 1e-15);
  EXPECT_EQ(frequencies.inv_freq.back(), theta.back());
}

TEST(HfWarnsPhasorAccepts, YarnZeroBetasMeanTheDefaults) {
  // HF: `get("beta_fast") or 32`, `get("beta_slow") or 1`.
  YarnRopeScaling zero = GoodYarn();
  zero.beta_fast = 0.0;
  zero.beta_slow = 0.0;
  RopeSpec a, b;
  a.scaling = zero;
  b.scaling = GoodYarn();
  EXPECT_EQ(MustCompute(a, 64, 1).inv_freq, MustCompute(b, 64, 1).inv_freq);
}

TEST(HfWarnsPhasorAccepts, YarnImplicitFactorBelowOne) {
  YarnRopeScaling yarn;
  yarn.original_max_position_embeddings = 4096;
  yarn.max_position_embeddings = 2048;  // factor = 2048/4096 = 0.5.
  RopeSpec spec;
  spec.scaling = yarn;
  const RopeFrequencies frequencies = MustCompute(spec, 64, 1);
  ExpectFrequenciesNear(frequencies.inv_freq,
                        ReferenceYarn(1e4, 64, 0.5, 4096, 32, 1, true), "yarn");
  EXPECT_EQ(frequencies.attention_factor, 1.0);  // get_mscale(f <= 1) = 1.
}

TEST(HfWarnsPhasorAccepts, YarnNegativeMscale) {
  YarnRopeScaling yarn = GoodYarn();
  yarn.mscale = -1.0;
  yarn.mscale_all_dim = 1.0;
  RopeSpec spec;
  spec.scaling = yarn;
  EXPECT_NEAR(MustCompute(spec, 64, 1).attention_factor,
              (1.0 - 0.1 * std::log(4.0)) / (1.0 + 0.1 * std::log(4.0)), 1e-15);
}

TEST(HfWarnsPhasorAccepts, LongRopeOneFactorBroadcastsOverPairs) {
  LongRopeScaling longrope;
  longrope.short_factor = {2.0};
  longrope.long_factor = {3.0};
  longrope.original_max_position_embeddings = 100;
  longrope.attention_factor = 1.0;
  RopeSpec spec;
  spec.scaling = longrope;
  std::vector<double> short_expected = ReferenceTheta(1e4, 8);
  std::vector<double> long_expected = short_expected;
  for (double& t : short_expected) t /= 2.0;
  for (double& t : long_expected) t /= 3.0;
  ExpectFrequenciesNear(MustCompute(spec, 8, 100).inv_freq, short_expected, "short");
  ExpectFrequenciesNear(MustCompute(spec, 8, 101).inv_freq, long_expected, "long");
}

TEST(HfWarnsPhasorAccepts, LongRopeFactorBelowOneAndOriginalOne) {
  LongRopeScaling longrope = GoodLongRope(8);
  longrope.factor = 0.5;
  RopeSpec spec;
  spec.scaling = longrope;
  EXPECT_EQ(MustCompute(spec, 8, 1).attention_factor, 1.0);  // f <= 1.
  // L0 = 1 only breaks the default attention factor with f > 1.
  longrope.original_max_position_embeddings = 1;
  longrope.factor = 1.0;
  spec.scaling = longrope;
  EXPECT_EQ(MustCompute(spec, 8, 1).attention_factor, 1.0);
  longrope.factor = 4.0;
  longrope.attention_factor = 1.25;
  spec.scaling = longrope;
  EXPECT_EQ(MustCompute(spec, 8, 1).attention_factor, 1.25);
}

TEST(HfWarnsPhasorAccepts, Llama3FactorBelowOne) {
  Llama3RopeScaling llama3 = GoodLlama3();
  llama3.factor = 0.5;
  RopeSpec spec;
  spec.base = 5e5;
  spec.scaling = llama3;
  ExpectFrequenciesNear(MustCompute(spec, 128, 1).inv_freq,
                        ReferenceLlama3(5e5, 128, 0.5, 1.0, 4.0, 8192), "llama3");
}

TEST(HfWarnsPhasorAccepts, Llama3HighNotAboveLowIsAStepAtContextOverLow) {
  for (const auto& [low, high] :
       std::vector<std::pair<double, double>>{{2.0, 2.0}, {4.0, 1.0}}) {
    Llama3RopeScaling llama3 = GoodLlama3();
    llama3.low_freq_factor = low;
    llama3.high_freq_factor = high;
    RopeSpec spec;
    spec.base = 5e5;
    spec.scaling = llama3;
    const RopeFrequencies frequencies = MustCompute(spec, 128, 1);
    const std::vector<double> theta = ReferenceTheta(5e5, 128);
    int kept = 0, divided = 0;
    for (size_t i = 0; i < theta.size(); ++i) {
      const double wavelength = 2.0 * M_PI / theta[i];
      ASSERT_NE(wavelength, 8192.0 / low);  // HF's 0/0 point is not hit here.
      if (wavelength > 8192.0 / low) {
        EXPECT_NEAR(frequencies.inv_freq[i], theta[i] / 8.0, 1e-14 * theta[i]) << i;
        ++divided;
      } else {
        EXPECT_EQ(frequencies.inv_freq[i], theta[i]) << i;
        ++kept;
      }
    }
    EXPECT_GT(kept, 0);
    EXPECT_GT(divided, 0);
    if (low > high) {
      ExpectFrequenciesNear(frequencies.inv_freq,
                            ReferenceLlama3(5e5, 128, 8.0, low, high, 8192), "llama3");
    }
  }
}

TEST(HfWarnsPhasorAccepts, Llama3OnTheDegenerateBandEdgeDividesByFactor) {
  // θ_0 = 1, wavelength 2π: put the single band edge L0/low exactly there.
  Llama3RopeScaling llama3 = GoodLlama3();
  llama3.original_max_position_embeddings = 8192;
  llama3.low_freq_factor = llama3.high_freq_factor = 8192.0 / (2.0 * M_PI);
  if (8192.0 / llama3.low_freq_factor != 2.0 * M_PI) {
    GTEST_SKIP() << "8192/(8192/2π) does not round back to 2π";
  }
  RopeSpec spec;
  spec.scaling = llama3;
  EXPECT_EQ(MustCompute(spec, 64, 1).inv_freq[0], 1.0 / 8.0);
}

TEST(HfWarnsPhasorAccepts, Llama3OriginalDefaultsToMaxPositionEmbeddingsThen8192) {
  Llama3RopeScaling from_max = GoodLlama3();
  from_max.max_position_embeddings = 4096;
  Llama3RopeScaling explicit_4096 = GoodLlama3();
  explicit_4096.original_max_position_embeddings = 4096;
  explicit_4096.max_position_embeddings = 131072;  // An explicit L0 wins.
  Llama3RopeScaling neither = GoodLlama3();
  RopeSpec a, b, c;
  a.base = b.base = c.base = 5e5;
  a.scaling = from_max;
  b.scaling = explicit_4096;
  c.scaling = neither;
  EXPECT_EQ(MustCompute(a, 128, 1).inv_freq, MustCompute(b, 128, 1).inv_freq);
  ExpectFrequenciesNear(MustCompute(a, 128, 1).inv_freq,
                        ReferenceLlama3(5e5, 128, 8.0, 1.0, 4.0, 4096), "4096");
  ExpectFrequenciesNear(MustCompute(c, 128, 1).inv_freq,
                        ReferenceLlama3(5e5, 128, 8.0, 1.0, 4.0, 8192), "8192");
}

std::vector<BadScaling> BadScalings() {
  const double nan = std::nan("");
  const double inf = INFINITY;
  const std::string p = "spec.rope.scaling.";
  std::vector<BadScaling> bad = {
      {"linear_factor_zero", LinearRopeScaling{0.0}, 64, 1e4, p + "linear.factor"},
      {"linear_factor_negative", LinearRopeScaling{-2.0}, 64, 1e4, p + "linear.factor"},
      {"linear_factor_nan", LinearRopeScaling{nan}, 64, 1e4, p + "linear.factor"},
      {"ntk_factor_zero", NtkRopeScaling{0.0}, 64, 1e4, p + "ntk.factor"},
      {"ntk_factor_inf", NtkRopeScaling{inf}, 64, 1e4, p + "ntk.factor"},
      {"ntk_rd_two", NtkRopeScaling{2.0}, 2, 1e4, "spec.rope.rotary_dim"},
      {"dynamic_factor_zero", DynamicNtkRopeScaling{0.0, 2048}, 64, 1e4,
       p + "dynamic.factor"},
      {"dynamic_factor_negative", DynamicNtkRopeScaling{-1.0, 2048}, 64, 1e4,
       p + "dynamic.factor"},
      {"dynamic_max_pos", DynamicNtkRopeScaling{2.0, 0}, 64, 1e4,
       p + "dynamic.max_position_embeddings"},
      {"dynamic_rd_two", DynamicNtkRopeScaling{2.0, 2048}, 2, 1e4, "spec.rope.rotary_dim"},
      {"yarn_factor_zero", With(GoodYarn(), [](auto& y) { y.factor = 0.0; }), 64, 1e4,
       p + "yarn.factor"},
      {"yarn_factor_nan", With(GoodYarn(), [&](auto& y) { y.factor = nan; }), 64, 1e4,
       p + "yarn.factor"},
      {"yarn_original_negative",
       With(GoodYarn(), [](auto& y) { y.original_max_position_embeddings = -1; }), 64,
       1e4, p + "yarn.original_max_position_embeddings"},
      {"yarn_max_zero", With(GoodYarn(), [](auto& y) { y.max_position_embeddings = 0; }),
       64, 1e4, p + "yarn.max_position_embeddings"},
      {"yarn_no_original_no_max",
       With(GoodYarn(), [](auto& y) { y.original_max_position_embeddings.reset(); }), 64,
       1e4, p + "yarn.original_max_position_embeddings"},
      {"yarn_no_factor_no_max", With(GoodYarn(), [](auto& y) { y.factor.reset(); }), 64,
       1e4, p + "yarn.factor"},
      {"yarn_beta_fast_nan", With(GoodYarn(), [&](auto& y) { y.beta_fast = nan; }), 64,
       1e4, p + "yarn.beta_fast"},
      {"yarn_beta_fast_negative", With(GoodYarn(), [](auto& y) { y.beta_fast = -32.0; }),
       64, 1e4, p + "yarn.beta_fast"},
      {"yarn_beta_slow_negative", With(GoodYarn(), [](auto& y) { y.beta_slow = -1.0; }),
       64, 1e4, p + "yarn.beta_slow"},
      {"yarn_mscale_nan", With(GoodYarn(), [&](auto& y) { y.mscale = nan; }), 64, 1e4,
       p + "yarn.mscale"},
      // get_mscale(4, -100) = 1 − 10·ln 4 < 0: a negative derived attention factor.
      {"yarn_mscale_ratio_negative", With(GoodYarn(), [](auto& y) {
         y.mscale = -100.0;
         y.mscale_all_dim = 1.0;
       }),
       64, 1e4, p + "yarn.mscale"},
      {"yarn_mscale_all_dim_inf",
       With(GoodYarn(), [&](auto& y) { y.mscale_all_dim = inf; }), 64, 1e4,
       p + "yarn.mscale_all_dim"},
      {"yarn_attention_zero", With(GoodYarn(), [](auto& y) { y.attention_factor = 0.0; }),
       64, 1e4, p + "yarn.attention_factor"},
      {"yarn_base_one", GoodYarn(), 64, 1.0, "spec.rope.base"},
      {"longrope_short_length",
       With(GoodLongRope(128), [](auto& l) { l.short_factor = {1, 1, 1}; }), 128, 1e4,
       p + "longrope.short_factor"},
      {"longrope_long_length",
       With(GoodLongRope(128), [](auto& l) { l.long_factor.pop_back(); }), 128, 1e4,
       p + "longrope.long_factor"},
      {"longrope_short_element",
       With(GoodLongRope(8), [](auto& l) { l.short_factor[2] = -1.0; }), 8, 1e4,
       p + "longrope.short_factor[2]"},
      {"longrope_long_element_nan",
       With(GoodLongRope(8), [&](auto& l) { l.long_factor[3] = nan; }), 8, 1e4,
       p + "longrope.long_factor[3]"},
      {"longrope_no_original_no_max", With(GoodLongRope(8), [](auto& l) {
         l.original_max_position_embeddings.reset();
         l.max_position_embeddings.reset();
       }),
       8, 1e4, p + "longrope.original_max_position_embeddings"},
      {"longrope_original_one",
       With(GoodLongRope(8), [](auto& l) { l.original_max_position_embeddings = 1; }), 8,
       1e4, p + "longrope.original_max_position_embeddings"},
      {"longrope_max_zero",
       With(GoodLongRope(8), [](auto& l) { l.max_position_embeddings = 0; }), 8, 1e4,
       p + "longrope.max_position_embeddings"},
      {"longrope_max_stands_in_too_small", With(GoodLongRope(8), [](auto& l) {
         l.original_max_position_embeddings.reset();
         l.max_position_embeddings = 1;
         l.factor = 2.0;  // f > 1: the default attention factor needs ln L0 != 0.
       }),
       8, 1e4, p + "longrope.max_position_embeddings"},
      {"longrope_factor_zero", With(GoodLongRope(8), [](auto& l) { l.factor = 0.0; }), 8,
       1e4, p + "longrope.factor"},
      {"longrope_original_zero",
       With(GoodLongRope(8), [](auto& l) { l.original_max_position_embeddings = 0; }), 8,
       1e4, p + "longrope.original_max_position_embeddings"},
      {"longrope_attention_zero",
       With(GoodLongRope(8), [](auto& l) { l.attention_factor = 0.0; }), 8, 1e4,
       p + "longrope.attention_factor"},
      {"longrope_attention_negative",
       With(GoodLongRope(8), [](auto& l) { l.attention_factor = -1.0; }), 8, 1e4,
       p + "longrope.attention_factor"},
      {"longrope_nothing_for_attention",
       With(GoodLongRope(8), [](auto& l) { l.max_position_embeddings.reset(); }), 8, 1e4,
       p + "longrope.factor"},
      {"llama3_factor_absent", Llama3RopeScaling(), 128, 5e5, p + "llama3.factor"},
      {"llama3_factor_zero", With(GoodLlama3(), [](auto& l) { l.factor = 0.0; }), 128,
       5e5, p + "llama3.factor"},
      {"llama3_low_zero", With(GoodLlama3(), [](auto& l) { l.low_freq_factor = 0.0; }),
       128, 5e5, p + "llama3.low_freq_factor"},
      {"llama3_high_negative",
       With(GoodLlama3(), [](auto& l) { l.high_freq_factor = -4.0; }), 128, 5e5,
       p + "llama3.high_freq_factor"},
      {"llama3_high_nan", With(GoodLlama3(), [&](auto& l) { l.high_freq_factor = nan; }),
       128, 5e5, p + "llama3.high_freq_factor"},
      {"llama3_original_zero",
       With(GoodLlama3(), [](auto& l) { l.original_max_position_embeddings = 0; }), 128,
       5e5, p + "llama3.original_max_position_embeddings"},
  };
  return bad;
}

TEST(RopeScalingValidation, EveryErrorPathNamesItsField) {
  for (const BadScaling& bad : BadScalings()) {
    RopeSpec spec;
    spec.rotary_dim = bad.rotary_dim;
    spec.base = bad.base;
    spec.scaling = bad.scaling;
    const absl::Status status = ValidateRopeSpec(spec, /*head_dim=*/128);
    EXPECT_THAT(status, IsFieldError(absl::StatusCode::kInvalidArgument, bad.field))
        << bad.label;
    // The same spec through the frequency entry point fails the same way.
    EXPECT_THAT(ComputeRopeFrequencies(spec, 128, 1).status(),
                IsFieldError(absl::StatusCode::kInvalidArgument, bad.field))
        << bad.label;
  }
}

TEST(RopeScalingValidation, ValidCounterpartsPass) {
  // Each bad case above is one edit away from these; they must pass, so the
  // failures above are caused by the edit.
  for (int64_t rd : {8, 64, 128}) {
    for (const RopeScaling& scaling :
         std::vector<RopeScaling>{LinearRopeScaling{1.0}, NtkRopeScaling{0.5},
                                  DynamicNtkRopeScaling{1.0, 1}, GoodYarn(),
                                  GoodLongRope(rd), GoodLlama3()}) {
      RopeSpec spec;
      spec.rotary_dim = rd;
      spec.scaling = scaling;
      EXPECT_TRUE(ValidateRopeSpec(spec, 128).ok())
          << RopeScalingName(scaling) << " rd=" << rd << ": "
          << ValidateRopeSpec(spec, 128);
    }
  }
  // Yarn with only max_position_embeddings: original and factor both follow.
  YarnRopeScaling only_max;
  only_max.max_position_embeddings = 4096;
  RopeSpec spec;
  spec.scaling = only_max;
  EXPECT_TRUE(ValidateRopeSpec(spec, 64).ok());
  // Longrope with only an attention factor needs neither factor nor max.
  LongRopeScaling attention_only = GoodLongRope(64);
  attention_only.max_position_embeddings.reset();
  attention_only.attention_factor = 1.1;
  spec.scaling = attention_only;
  EXPECT_TRUE(ValidateRopeSpec(spec, 64).ok());
}

TEST(RopeScalingValidation, MessagesReadAsDocumented) {
  RopeSpec spec;
  spec.rotary_dim = 128;
  spec.scaling = With(GoodLongRope(128), [](auto& l) { l.short_factor = {1, 1, 1}; });
  EXPECT_EQ(ValidateRopeSpec(spec, 128).message(),
            "spec.rope.scaling.longrope.short_factor: must have rotary_dim/2 = 64 "
            "values (or 1 for every pair), got 3");
  spec.scaling = With(GoodYarn(), [](auto& y) { y.beta_fast = -0.5; });
  EXPECT_EQ(ValidateRopeSpec(spec, 128).message(),
            "spec.rope.scaling.yarn.beta_fast: must be finite and >= 0 (0 means the "
            "default 32), got -0.5");
  spec.scaling = Llama3RopeScaling();
  EXPECT_EQ(ValidateRopeSpec(spec, 128).message(),
            "spec.rope.scaling.llama3.factor: required (no default: Llama 3.1 uses "
            "8, Llama 3.2 32)");
}

TEST(RopeScalingValidation, CustomPrefixIsUsed) {
  RopeSpec spec;
  spec.scaling = With(GoodYarn(), [](auto& y) { y.beta_slow = -1.0; });
  EXPECT_THAT(ValidateRopeSpec(spec, 64, "rope"),
              IsFieldError(absl::StatusCode::kInvalidArgument,
                           std::string("rope.scaling.yarn.beta_slow")));
  spec.scaling = NtkRopeScaling{2.0};
  spec.rotary_dim = 2;
  EXPECT_THAT(ValidateRopeSpec(spec, 64, "profiles.x.rope"),
              IsFieldError(absl::StatusCode::kInvalidArgument,
                           std::string("profiles.x.rope.rotary_dim")));
}

TEST(RopeScalingValidation, NonFiniteScaledFrequencyIsRefused) {
  // Each field is valid alone; together θ_0 / 1e-320 overflows to infinity.
  LongRopeScaling longrope;
  longrope.short_factor = {1e-320, 1.0};
  longrope.long_factor = {1.0, 1.0};
  longrope.original_max_position_embeddings = 4096;
  longrope.attention_factor = 1.0;
  RopeSpec spec;
  spec.scaling = longrope;
  const absl::Status status = ComputeRopeFrequencies(spec, 4, 1).status();
  EXPECT_THAT(status, IsFieldError(absl::StatusCode::kInvalidArgument,
                                   std::string("spec.rope")));
  EXPECT_THAT(std::string(status.message()), HasSubstr("inverse frequency 0"));
}


// ---------------------------------------------------------------------------
// Every θ_i is the nearest double of its formula, evaluated here directly in
// __float128 (libquadmath), independently of core/frequency_ladder.

using testing::Quad;

Quad QuadTheta(Quad base, int64_t i, int64_t rd) {
  return powq(base, -Quad(2 * i) / Quad(rd));
}

Quad QuadTwoPi() {
  Quad two_pi = 0;
  for (double piece : testing::kTwoPiPieces) two_pi += Quad(piece);
  return two_pi;
}

struct RoundingCase {
  std::string name;
  RopeScaling scaling;
  double base;
  int64_t rd;
  int64_t seq_len;
  std::vector<Quad> (*oracle)(const RoundingCase&);
};

std::vector<Quad> PlainOracle(const RoundingCase& c) {
  std::vector<Quad> theta;
  for (int64_t i = 0; i < c.rd / 2; ++i) theta.push_back(QuadTheta(Quad(c.base), i, c.rd));
  return theta;
}

std::vector<Quad> LinearOracle(const RoundingCase& c) {
  std::vector<Quad> theta = PlainOracle(c);
  for (Quad& t : theta) t /= Quad(std::get<LinearRopeScaling>(c.scaling).factor);
  return theta;
}

std::vector<Quad> NtkWithStretch(const RoundingCase& c, Quad stretch) {
  const Quad rd = Quad(c.rd);
  const Quad base = Quad(c.base) * powq(stretch, rd / (rd - 2));
  std::vector<Quad> theta;
  for (int64_t i = 0; i < c.rd / 2; ++i) theta.push_back(QuadTheta(base, i, c.rd));
  return theta;
}

std::vector<Quad> NtkOracle(const RoundingCase& c) {
  return NtkWithStretch(c, Quad(std::get<NtkRopeScaling>(c.scaling).factor));
}

std::vector<Quad> DynamicOracle(const RoundingCase& c) {
  const auto& d = std::get<DynamicNtkRopeScaling>(c.scaling);
  const Quad original = Quad(static_cast<double>(d.max_position_embeddings));
  const Quad length = std::max(Quad(static_cast<double>(c.seq_len)), original);
  const Quad f = Quad(d.factor);
  return NtkWithStretch(c, f * length / original - (f - 1));
}

std::vector<Quad> YarnOracle(const RoundingCase& c) {
  const auto& y = std::get<YarnRopeScaling>(c.scaling);
  const Quad context = Quad(static_cast<double>(*y.original_max_position_embeddings));
  auto correction = [&](double rotations) {
    return Quad(c.rd) * logq(context / (Quad(rotations) * QuadTwoPi())) /
           (2 * logq(Quad(c.base)));
  };
  Quad low = correction(y.beta_fast), high = correction(y.beta_slow);
  if (y.truncate) {
    low = floorq(low);
    high = ceilq(high);
  }
  low = std::max(low, Quad(0));
  high = std::min(high, Quad(c.rd - 1));
  if (low == high) high += Quad(0.001);
  std::vector<Quad> theta = PlainOracle(c);
  for (size_t i = 0; i < theta.size(); ++i) {
    Quad ramp = (Quad(static_cast<double>(i)) - low) / (high - low);
    ramp = std::min(std::max(ramp, Quad(0)), Quad(1));
    theta[i] = theta[i] / Quad(*y.factor) * ramp + theta[i] * (1 - ramp);
  }
  return theta;
}

std::vector<Quad> LongRopeOracle(const RoundingCase& c) {
  const auto& l = std::get<LongRopeScaling>(c.scaling);
  std::vector<Quad> theta = PlainOracle(c);
  const std::vector<double>& ext =
      c.seq_len > *l.original_max_position_embeddings ? l.long_factor : l.short_factor;
  for (size_t i = 0; i < theta.size(); ++i) theta[i] /= Quad(ext[i]);
  return theta;
}

std::vector<Quad> Llama3Oracle(const RoundingCase& c) {
  const auto& l = std::get<Llama3RopeScaling>(c.scaling);
  // The cases here set L0 explicitly.
  const Quad context = Quad(static_cast<double>(*l.original_max_position_embeddings));
  const Quad lf = Quad(l.low_freq_factor), hf = Quad(l.high_freq_factor);
  std::vector<Quad> theta = PlainOracle(c);
  for (Quad& t : theta) {
    const Quad wavelength = QuadTwoPi() / t;
    if (wavelength > context / lf) {
      t /= Quad(*l.factor);
    } else if (!(wavelength < context / hf)) {
      const Quad smooth = (context / wavelength - lf) / (hf - lf);
      t = (1 - smooth) * t / Quad(*l.factor) + smooth * t;
    }
  }
  return theta;
}

std::vector<RoundingCase> RoundingCases() {
  std::vector<RoundingCase> cases;
  cases.push_back({"default", NoRopeScaling{}, 10000.0, 128, 1, PlainOracle});
  cases.push_back({"default_base1e6_rd64", NoRopeScaling{}, 1e6, 64, 1, PlainOracle});
  cases.push_back({"default_rd96", NoRopeScaling{}, 10000.0, 96, 1, PlainOracle});
  cases.push_back({"linear", LinearRopeScaling{.factor = 4.0}, 10000.0, 128, 1,
                   LinearOracle});
  cases.push_back({"linear_3", LinearRopeScaling{.factor = 3.0}, 500000.0, 128, 1,
                   LinearOracle});
  cases.push_back({"ntk", NtkRopeScaling{.factor = 2.5}, 10000.0, 128, 1, NtkOracle});
  cases.push_back({"dynamic",
                   DynamicNtkRopeScaling{.factor = 2.0, .max_position_embeddings = 4096},
                   10000.0, 128, 10000, DynamicOracle});
  YarnRopeScaling yarn;
  yarn.factor = 4.0;
  yarn.original_max_position_embeddings = 4096;
  cases.push_back({"yarn", yarn, 10000.0, 128, 1, YarnOracle});
  yarn.truncate = false;
  yarn.factor = 40.0;
  cases.push_back({"yarn_untruncated", yarn, 10000.0, 64, 1, YarnOracle});
  LongRopeScaling longrope;
  longrope.original_max_position_embeddings = 4096;
  longrope.factor = 32.0;
  for (int i = 0; i < 48; ++i) {
    longrope.short_factor.push_back(1.0 + 0.01 * i);
    longrope.long_factor.push_back(1.0 + 0.37 * i + 0.001 * i * i);
  }
  cases.push_back({"longrope_short", longrope, 10000.0, 96, 4096, LongRopeOracle});
  cases.push_back({"longrope_long", longrope, 10000.0, 96, 100000, LongRopeOracle});
  Llama3RopeScaling llama3;
  llama3.factor = 8.0;
  llama3.original_max_position_embeddings = 8192;
  cases.push_back({"llama3", llama3, 500000.0, 128, 1, Llama3Oracle});
  return cases;
}

TEST(RopeFrequencyRounding, EveryThetaIsTheNearestDoubleOfItsFormula) {
  int64_t checked = 0;
  for (const RoundingCase& c : RoundingCases()) {
    PHASOR_ASSERT_OK(ValidateRopeScaling(c.scaling, c.base, c.rd, "spec"));
    const RopeFrequencies f = ScaledRopeFrequencies(c.scaling, c.base, c.rd, c.seq_len);
    const std::vector<Quad> oracle = c.oracle(c);
    ASSERT_EQ(f.inv_freq.size(), oracle.size()) << c.name;
    for (size_t i = 0; i < oracle.size(); ++i) {
      EXPECT_EQ(f.inv_freq[i], testing::NearestDouble(oracle[i]))
          << c.name << " θ_" << i << " off by "
          << static_cast<double>((Quad(f.inv_freq[i]) - oracle[i]) / oracle[i]) /
                 0x1p-52
          << " ulp";
      ++checked;
    }
  }
  std::printf("RoPE θ correctly rounded: %lld frequencies in 12 configurations\n",
              static_cast<long long>(checked));
}

}  // namespace
}  // namespace phasor

namespace phasor {
namespace {

TEST(ProportionalRope, ZeroAnglesPassThroughAndBadFieldsAreNamed) {
  RopeSpec spec;
  spec.rotary_dim = 16;
  spec.scaling = ProportionalRopeScaling{.factor = 2.0, .partial_rotary_factor = 0.5};
  const absl::StatusOr<RopeFrequencies> f = ComputeRopeFrequencies(spec, 16, 1);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ(f->inv_freq.size(), 8u);
  // floor(0.5·16/2) = 4 rotated pairs, base^(−2i/16)/2; the rest 0.
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(f->inv_freq[i], std::pow(10000.0, -i / 8.0) / 2, 1e-16);
  for (int i = 4; i < 8; ++i) EXPECT_EQ(f->inv_freq[i], 0.0);
  // θ = 0: the pair's channels come back unchanged at any position.
  std::vector<float> q(16), out(16);
  for (int i = 0; i < 16; ++i) q[i] = 0.25f * static_cast<float>(i + 1);
  RopeOperand op;
  op.dtype = DType::kFloat32;
  op.num_tokens = 1;
  op.num_heads = 1;
  op.head_dim = 16;
  op.in = absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(q.data()), 64);
  op.out = absl::Span<uint8_t>(reinterpret_cast<uint8_t*>(out.data()), 64);
  const std::vector<int64_t> p = {123456789};
  ApplyRope(spec, *f, Positions::Integers(p), ExecutionOptions(), op, nullptr);
  for (int i : {4, 5, 6, 7, 12, 13, 14, 15}) EXPECT_EQ(out[i], q[i]) << i;
  EXPECT_NE(out[0], q[0]);

  spec.scaling = ProportionalRopeScaling{.factor = 1.0, .partial_rotary_factor = 1.5};
  EXPECT_THAT(ValidateRopeSpec(spec, 16),
              IsFieldError(absl::StatusCode::kInvalidArgument,
                           "spec.rope.scaling.proportional.partial_rotary_factor"));
  spec.scaling = ProportionalRopeScaling{.factor = 0.0, .partial_rotary_factor = 1.0};
  EXPECT_THAT(ValidateRopeSpec(spec, 16),
              IsFieldError(absl::StatusCode::kInvalidArgument,
                           "spec.rope.scaling.proportional.factor"));
}

}  // namespace
}  // namespace phasor
