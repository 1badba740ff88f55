#include "core/learned.h"

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/tensor_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"

namespace phasor {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Slurp(const std::string& name) {
  std::ifstream f(std::string(PHASOR_TEST_DATA_DIR) + "/" + name, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string DataPath(const std::string& name) {
  return std::string(PHASOR_TEST_DATA_DIR) + "/" + name;
}

// gen_tables.py writes T[r, c] = r + c/10 for a 5x4 table.
double TableValue(int64_t r, int64_t c) { return r + c / 10.0; }

TEST(TensorFileTest, ReadsNumpyFloat32AndFloat64) {
  for (const char* name : {"table_5x4_f32.npy", "table_5x4_f64.npy"}) {
    absl::StatusOr<HostArray> a = ReadArrayFile(DataPath(name));
    PHASOR_ASSERT_OK(a.status());
    EXPECT_THAT(a->shape, ElementsAre(5, 4));
    ASSERT_EQ(a->values.size(), 20u);
    for (int r = 0; r < 5; ++r) {
      for (int c = 0; c < 4; ++c) {
        EXPECT_FLOAT_EQ(static_cast<float>(a->values[r * 4 + c]), TableValue(r, c));
      }
    }
  }
}

TEST(TensorFileTest, ReadsNamedSafetensorsTensor) {
  absl::StatusOr<HostArray> wpe = ReadArrayFile(DataPath("table.safetensors"), "wpe");
  PHASOR_ASSERT_OK(wpe.status());
  EXPECT_THAT(wpe->shape, ElementsAre(5, 4));
  EXPECT_FLOAT_EQ(static_cast<float>(wpe->values[3 * 4 + 2]), TableValue(3, 2));
  absl::StatusOr<HostArray> other = ReadArrayFile(DataPath("table.safetensors"), "other");
  PHASOR_ASSERT_OK(other.status());
  EXPECT_THAT(other->values, ElementsAre(1.5, -2.5));
  // Two tensors and no name: ambiguous.
  EXPECT_EQ(ReadArrayFile(DataPath("table.safetensors")).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadArrayFile(DataPath("table.safetensors"), "nope").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(TensorFileTest, MissingFileIsNotFound) {
  EXPECT_EQ(ReadArrayFile(DataPath("does_not_exist.npy")).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ReadArrayFile(DataPath("gen_tables.py")).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// LevelDB-style: every truncated prefix of a valid file is rejected cleanly.
TEST(TensorFileTest, EveryTruncatedPrefixIsRejected) {
  const std::string npy = Slurp("table_5x4_f32.npy");
  ASSERT_GT(npy.size(), 100u);
  for (size_t n = 0; n < npy.size(); ++n) {
    absl::StatusOr<HostArray> a = ParseNpy(absl::string_view(npy.data(), n), "t.npy");
    EXPECT_FALSE(a.ok()) << "prefix " << n;
    EXPECT_THAT(std::string(a.status().message()), HasSubstr("t.npy"));
  }
  EXPECT_TRUE(ParseNpy(npy, "t.npy").ok());
  const std::string st = Slurp("table.safetensors");
  for (size_t n = 0; n < st.size(); ++n) {
    EXPECT_FALSE(ParseSafetensors(absl::string_view(st.data(), n), "wpe", "t").ok())
        << "prefix " << n;
  }
  EXPECT_TRUE(ParseSafetensors(st, "wpe", "t").ok());
}

TEST(TensorFileTest, CorruptedBytesNeverCrash) {
  // Flip each byte of both headers in turn: parse must return (ok or error).
  for (const std::string name : {"table_5x4_f32.npy", "table.safetensors"}) {
    const std::string good = Slurp(name);
    for (size_t i = 0; i < std::min<size_t>(good.size(), 160); ++i) {
      for (unsigned char v : {0x00, 0x22, 0x7b, 0xff}) {
        std::string bad = good;
        bad[i] = static_cast<char>(v);
        const absl::StatusOr<HostArray> parsed =
            name == "table.safetensors" ? ParseSafetensors(bad, "wpe", name)
                                        : ParseNpy(bad, name);
        // Either a clean error that names the file, or an array whose
        // values fill its shape exactly.
        if (parsed.ok()) {
          int64_t elements = 1;
          for (const int64_t extent : parsed->shape) {
            ASSERT_GE(extent, 0) << name << " byte " << i;
            elements *= extent;
          }
          EXPECT_EQ(static_cast<int64_t>(parsed->values.size()), elements)
              << name << " byte " << i << " = " << int{v};
        } else {
          EXPECT_THAT(std::string(parsed.status().message()), HasSubstr(name))
              << "byte " << i << " = " << int{v};
        }
      }
    }
  }
}

TEST(TensorFileTest, RejectsFortranOrderAndUnsupportedDtypes) {
  std::string npy = Slurp("table_5x4_f32.npy");
  const size_t at = npy.find("False");
  ASSERT_NE(at, std::string::npos);
  std::string fortran = npy;
  fortran.replace(at, 5, "True ");
  EXPECT_THAT(std::string(ParseNpy(fortran, "f").status().message()),
              HasSubstr("Fortran"));
  std::string big_endian = npy;
  big_endian[big_endian.find("<f4")] = '>';
  EXPECT_THAT(std::string(ParseNpy(big_endian, "b").status().message()),
              HasSubstr("dtype"));
}

TEST(LearnedTableTest, LooksUpRowsAndAddsScaledContent) {
  absl::StatusOr<LearnedTable> table = LearnedTable::FromFile(DataPath("table_5x4_f32.npy"));
  PHASOR_ASSERT_OK(table.status());
  EXPECT_EQ(table->rows(), 5);
  EXPECT_EQ(table->dim(), 4);
  const std::vector<int64_t> pos = {4, 0, 2};
  std::vector<float> out(12);
  PHASOR_ASSERT_OK(table->ValidateInputs(Positions::Integers(pos), absl::Span<const float>(), 1.0f));
  table->Encode(Positions::Integers(pos), {}, 1, {}, absl::MakeSpan(out));
  for (int t = 0; t < 3; ++t) {
    for (int c = 0; c < 4; ++c) EXPECT_FLOAT_EQ(out[t * 4 + c], TableValue(pos[t], c));
  }
  std::vector<float> content(12, 1.0f);
  table->Encode(Positions::Integers(pos), content, 0.5f, {}, absl::MakeSpan(out));
  EXPECT_FLOAT_EQ(out[5], 0.5f + TableValue(0, 1));
  // Safetensors gives the same table.
  absl::StatusOr<LearnedTable> st = LearnedTable::FromFile(DataPath("table.safetensors"), "wpe");
  PHASOR_ASSERT_OK(st.status());
  EXPECT_EQ(std::memcmp(st->values().data(), table->values().data(), 20 * 4), 0);
}

TEST(LearnedTableTest, PositionOutsideTableIsOutOfRange) {
  absl::StatusOr<LearnedTable> table = LearnedTable::FromFile(DataPath("table_5x4_f64.npy"));
  PHASOR_ASSERT_OK(table.status());
  const std::vector<int64_t> past = {0, 1, 5};
  const absl::Status s = table->ValidateInputs(Positions::Integers(past), absl::Span<const float>(), 1.0f);
  EXPECT_THAT(s, IsFieldError(absl::StatusCode::kOutOfRange, "positions[2]"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("5 rows"));
  const std::vector<int64_t> negative = {-1};
  EXPECT_THAT(table->ValidateInputs(Positions::Integers(negative), absl::Span<const float>(), 1.0f),
              IsFieldError(absl::StatusCode::kOutOfRange, "positions[0]"));
  const std::vector<double> fractional = {1.0, 2.5};
  EXPECT_THAT(table->ValidateInputs(Positions::Reals(fractional), absl::Span<const float>(), 1.0f),
              IsFieldError(absl::StatusCode::kInvalidArgument, "positions[1]"));
  const std::vector<double> whole = {1.0, 4.0};
  PHASOR_ASSERT_OK(table->ValidateInputs(Positions::Reals(whole), absl::Span<const float>(), 1.0f));
  const std::vector<float> content(3);
  EXPECT_THAT(table->ValidateInputs(Positions::Reals(whole), content, 1),
              IsFieldError(absl::StatusCode::kInvalidArgument, "content"));
}

TEST(LearnedTableTest, RejectsNonMatrixTables) {
  HostArray vector{{3}, {1, 2, 3}};
  EXPECT_EQ(LearnedTable::FromArray(vector, "v").status().code(),
            absl::StatusCode::kInvalidArgument);
  HostArray with_nan{{1, 2}, {1, NAN}};
  EXPECT_EQ(LearnedTable::FromArray(with_nan, "n").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace phasor
