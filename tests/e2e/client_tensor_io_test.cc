// Tests for client/tensor_io: the .npy and CSV files phasor-client reads and
// writes. (NumPy itself reading and writing these files is covered by the
// end-to-end tests; here are the round trips and the malformed inputs.)
#include "client/tensor_io.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace phasor {
namespace {

using ::testing::HasSubstr;

v1::Tensor Make(v1::DType dtype, std::vector<int64_t> shape,
                const std::string& data) {
  v1::Tensor tensor;
  tensor.set_dtype(dtype);
  for (const int64_t dim : shape) tensor.add_shape(dim);
  tensor.set_data(data);
  return tensor;
}

template <typename T>
std::string Bytes(std::vector<T> values) {
  return std::string(reinterpret_cast<const char*>(values.data()),
                     values.size() * sizeof(T));
}

TEST(NpyTest, RoundTripsEveryNumpyDtype) {
  const std::vector<v1::Tensor> tensors = {
      Make(v1::FLOAT32, {2, 3}, Bytes<float>({1, -2, 3.5f, 0, 1e-30f, 7})),
      Make(v1::FLOAT64, {3}, Bytes<double>({0.1, -1e300, 5})),
      Make(v1::FLOAT16, {2}, Bytes<uint16_t>({0x3c00, 0xc000})),
      Make(v1::INT64, {2, 1},
           Bytes<int64_t>({std::numeric_limits<int64_t>::max(), -3})),
      Make(v1::INT32, {1, 2}, Bytes<int32_t>({-7, 9})),
      Make(v1::UINT8, {4}, Bytes<uint8_t>({0, 1, 254, 255})),
      Make(v1::BOOL, {2}, Bytes<uint8_t>({0, 1})),
      Make(v1::FLOAT32, {}, Bytes<float>({42})),
      Make(v1::FLOAT32, {0, 4}, ""),
  };
  for (const v1::Tensor& tensor : tensors) {
    const std::string npy = TensorToNpy(tensor);
    auto parsed = NpyToTensor(npy, "test.npy");
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(parsed->dtype(), tensor.dtype());
    EXPECT_THAT(parsed->shape(), ::testing::ElementsAreArray(tensor.shape()));
    EXPECT_EQ(parsed->data(), tensor.data());
  }
}

TEST(NpyTest, WritesVersion1HeaderAlignedTo64Bytes) {
  const std::string npy =
      TensorToNpy(Make(v1::FLOAT32, {3}, Bytes<float>({1, 2, 3})));
  ASSERT_GE(npy.size(), 10u);
  EXPECT_EQ(npy.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const size_t header_length = static_cast<uint8_t>(npy[8]) |
                               (static_cast<uint8_t>(npy[9]) << 8);
  EXPECT_EQ((10 + header_length) % 64, 0u);
  const std::string header = npy.substr(10, header_length);
  EXPECT_THAT(header, HasSubstr("'descr': '<f4'"));
  EXPECT_THAT(header, HasSubstr("'fortran_order': False"));
  EXPECT_THAT(header, HasSubstr("'shape': (3,)"));
  EXPECT_EQ(header.back(), '\n');
  EXPECT_EQ(npy.size(), 10 + header_length + 12);
}

TEST(NpyTest, WidensBFloat16ToFloat32Exactly) {
  // bf16 0x3fc0 = 1.5, 0xc2f7 = -123.5.
  const std::string npy =
      TensorToNpy(Make(v1::BFLOAT16, {2}, Bytes<uint16_t>({0x3fc0, 0xc2f7})));
  auto parsed = NpyToTensor(npy, "bf16.npy");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->dtype(), v1::FLOAT32);
  EXPECT_EQ(parsed->data(), Bytes<float>({1.5f, -123.5f}));
}

TEST(NpyTest, RejectsEveryTruncatedPrefix) {
  const std::string npy =
      TensorToNpy(Make(v1::INT64, {2, 2}, Bytes<int64_t>({1, 2, 3, 4})));
  for (size_t length = 0; length < npy.size(); ++length) {
    EXPECT_FALSE(NpyToTensor(npy.substr(0, length), "cut.npy").ok())
        << "prefix of " << length << " bytes";
  }
}

TEST(NpyTest, RejectsWhatItCannotRepresent) {
  const auto with_header = [](const std::string& dict) {
    std::string out("\x93NUMPY\x01\x00", 8);
    out.push_back(static_cast<char>(dict.size()));
    out.push_back('\0');
    return out + dict + std::string(8, '\0');
  };
  EXPECT_THAT(
      NpyToTensor(with_header("{'descr': '>f8', 'fortran_order': False, "
                              "'shape': (1,), }"),
                  "big.npy")
          .status()
          .message(),
      HasSubstr("unsupported .npy dtype '>f8'"));
  EXPECT_THAT(
      NpyToTensor(with_header("{'descr': '<f8', 'fortran_order': True, "
                              "'shape': (1,), }"),
                  "f.npy")
          .status()
          .message(),
      HasSubstr("Fortran-order"));
  EXPECT_FALSE(NpyToTensor("not numpy at all", "x.npy").ok());
}

TEST(CsvTest, IntegersStayExactInt64) {
  // Nanosecond timestamps are above 2^53: a double would round them.
  auto tensor = CsvToTensor("1700000000000000001\n1700000000000000003\n",
                            "ts.csv");
  ASSERT_TRUE(tensor.ok()) << tensor.status();
  EXPECT_EQ(tensor->dtype(), v1::INT64);
  EXPECT_THAT(tensor->shape(), ::testing::ElementsAre(2));
  EXPECT_EQ(tensor->data(), Bytes<int64_t>({1700000000000000001,
                                            1700000000000000003}));
}

TEST(CsvTest, HeaderCommentsBlanksAndMissingValues) {
  auto tensor = CsvToTensor("hr,spo2\n# a comment\n\n70, 0.98\n,nan\n72,\n",
                            "v.csv");
  ASSERT_TRUE(tensor.ok()) << tensor.status();
  EXPECT_EQ(tensor->dtype(), v1::FLOAT64);
  EXPECT_THAT(tensor->shape(), ::testing::ElementsAre(3, 2));
  auto values = TensorToDoubles(*tensor);
  ASSERT_TRUE(values.ok());
  EXPECT_EQ((*values)[0], 70);
  EXPECT_EQ((*values)[1], 0.98);
  EXPECT_TRUE(std::isnan((*values)[2]));
  EXPECT_TRUE(std::isnan((*values)[3]));
  EXPECT_EQ((*values)[4], 72);
  EXPECT_TRUE(std::isnan((*values)[5]));
}

TEST(CsvTest, RejectsRaggedRowsAndTextAfterTheHeader) {
  EXPECT_THAT(CsvToTensor("1,2\n3\n", "r.csv").status().message(),
              HasSubstr("r.csv:2: 1 columns, expected 2"));
  EXPECT_THAT(CsvToTensor("a\n1\nb\n", "t.csv").status().message(),
              HasSubstr("t.csv:3: not a number"));
}

TEST(CsvTest, WritesDigitsThatReadBackExactly) {
  const v1::Tensor floats =
      Make(v1::FLOAT32, {2, 2}, Bytes<float>({0.1f, 1.0f / 3, -2e-7f, 1e30f}));
  auto back = CsvToTensor(TensorToCsv(floats), "f.csv");
  ASSERT_TRUE(back.ok()) << back.status();
  auto narrowed = CastTensor(*back, v1::FLOAT32, "f");
  ASSERT_TRUE(narrowed.ok());
  EXPECT_EQ(narrowed->data(), floats.data());

  const v1::Tensor doubles = Make(v1::FLOAT64, {2}, Bytes<double>({0.1, M_PI}));
  back = CsvToTensor(TensorToCsv(doubles), "d.csv");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->data(), doubles.data());
}

TEST(CastTest, IntegersNeedIntegralInRangeValues) {
  const v1::Tensor reals = Make(v1::FLOAT64, {2}, Bytes<double>({3, 2.5}));
  EXPECT_THAT(CastTensor(reals, v1::INT64, "positions").status().message(),
              HasSubstr("positions[1]: 2.5 is not an integer"));
  const v1::Tensor wide = Make(v1::INT64, {1}, Bytes<int64_t>({1LL << 40}));
  EXPECT_THAT(CastTensor(wide, v1::INT32, "channels").status().message(),
              HasSubstr("does not fit in int32"));
  auto exact = CastTensor(Make(v1::FLOAT64, {2}, Bytes<double>({-4, 9})),
                          v1::INT32, "x");
  ASSERT_TRUE(exact.ok());
  EXPECT_EQ(exact->data(), Bytes<int32_t>({-4, 9}));
}

TEST(CheckedElementCountTest, ByteCountMustMatchShape) {
  EXPECT_THAT(CheckedElementCount(Make(v1::FLOAT32, {2, 2}, "abc"), "query")
                  .status()
                  .message(),
              HasSubstr("query.data: expected 16 bytes"));
  EXPECT_FALSE(
      CheckedElementCount(Make(v1::FLOAT32, {-1}, ""), "query").ok());
  EXPECT_FALSE(CheckedElementCount(
                   Make(v1::FLOAT32, {1LL << 40, 1LL << 40}, ""), "query")
                   .ok());
}

TEST(TableTest, ElidesTheMiddleOfLongAxes) {
  std::vector<float> values(100 * 20);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  TableOptions options;
  options.max_rows = 4;
  options.max_columns = 4;
  const std::string table =
      FormatTensorTable(Make(v1::FLOAT32, {100, 20}, Bytes(values)), options);
  EXPECT_THAT(table, HasSubstr("float32 [100,20]"));
  // Rows 0, 1, ..., 98, 99 and columns 0, 1, ..., 18, 19.
  EXPECT_THAT(table, HasSubstr("1999"));  // Row 99, column 19.
  EXPECT_THAT(table, HasSubstr("..."));
  EXPECT_THAT(table, ::testing::Not(HasSubstr("1000")));  // Row 50.
}

TEST(TableTest, ShowsNegativeZeroAsZero) {
  const std::string table =
      FormatTensorTable(Make(v1::FLOAT32, {2}, Bytes<float>({-0.0f, 1})));
  EXPECT_THAT(table, ::testing::Not(HasSubstr("-0")));
}

}  // namespace
}  // namespace phasor
