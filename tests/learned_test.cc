#include "core/positional/learned.h"

#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/io/tensor_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/quad_reference.h"
#include "tests/status_matchers.h"

namespace phasor {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string DataPath(const std::string& name) {
  return std::string(PHASOR_TEST_DATA_DIR) + "/" + name;
}

// gen_tables.py writes T[r, c] = r + c/10 for a 5x4 table.
double TableValue(int64_t r, int64_t c) { return r + c / 10.0; }

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

// Float64 outputs: rows widened, content added in double.
namespace float64_output {

TEST(Float64Learned, RowsWidenedAndContentAddedInDouble) {
  HostArray array;
  array.shape = {3, 2};
  array.values = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f};
  absl::StatusOr<LearnedTable> table = LearnedTable::FromArray(array, "t");
  ASSERT_TRUE(table.ok()) << table.status();
  const std::vector<int64_t> p = {2, 0};
  const std::vector<double> content = {1.0, 2.0, 3.0, 1e-12};
  std::vector<double> out(4);
  PHASOR_ASSERT_OK(table->ValidateInputs(Positions::Integers(p), absl::MakeConstSpan(content), 2.0));
  table->Encode(Positions::Integers(p), content, 2.0, ExecutionOptions(), absl::MakeSpan(out));
  EXPECT_EQ(out[0], 2.0 + double(0.5f));
  EXPECT_EQ(out[1], 4.0 + double(0.6f));
  EXPECT_EQ(out[2], 6.0 + double(0.1f));
  EXPECT_EQ(out[3], 2e-12 + double(0.2f));
}

}  // namespace float64_output

}  // namespace
}  // namespace phasor
