// Tests for core/tensor_file: the one .npy reader and the .safetensors
// reader on nlohmann::json. (learned_test.cc reads the checked-in files and
// feeds their truncated prefixes; these build small files byte by byte.)
#include "core/io/tensor_file.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"

namespace phasor {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A version-1.0 (or 2.0) .npy file with `header` (the dict literal, padded
// here) and `data`.
std::string Npy(const std::string& dict, const std::string& data, int major = 1) {
  std::string header = dict + "\n";
  std::string out("\x93NUMPY", 6);
  out.push_back(static_cast<char>(major));
  out.push_back('\0');
  const uint32_t n = static_cast<uint32_t>(header.size());
  out.push_back(static_cast<char>(n & 0xff));
  out.push_back(static_cast<char>((n >> 8) & 0xff));
  if (major != 1) {
    out.push_back(static_cast<char>((n >> 16) & 0xff));
    out.push_back(static_cast<char>((n >> 24) & 0xff));
  }
  return out + header + data;
}

template <typename T>
std::string Bytes(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()),
                     values.size() * sizeof(T));
}

// A .safetensors file from its JSON header text and data buffer.
std::string Safetensors(const std::string& json, const std::string& buffer) {
  std::string out(8, '\0');
  uint64_t n = json.size();
  for (int b = 0; b < 8; ++b) out[b] = static_cast<char>((n >> (8 * b)) & 0xff);
  return out + json + buffer;
}

TEST(NpyArrayTest, ReadsEveryDtypeAsAView) {
  struct Case {
    const char* descr;
    DType dtype;
    size_t bytes;
  };
  for (const Case& c : {Case{"<f4", DType::kFloat32, 4}, Case{"<f8", DType::kFloat64, 8},
                        Case{"<f2", DType::kFloat16, 2}, Case{"<i8", DType::kInt64, 8},
                        Case{"<i4", DType::kInt32, 4}, Case{"|u1", DType::kUInt8, 1},
                        Case{"|b1", DType::kBool, 1}}) {
    const std::string data(3 * 2 * c.bytes, '\x01');
    const std::string file = Npy(
        absl::StrCat("{'descr': '", c.descr, "', 'fortran_order': False, 'shape': (3, 2), }"),
        data);
    absl::StatusOr<NpyArray> npy = ParseNpyArray(file, "x.npy");
    PHASOR_ASSERT_OK(npy.status());
    EXPECT_EQ(npy->dtype, c.dtype) << c.descr;
    EXPECT_THAT(npy->shape, ElementsAre(3, 2));
    EXPECT_EQ(npy->num_elements, 6);
    EXPECT_EQ(npy->data, data);
  }
}

TEST(NpyArrayTest, AcceptsWhatNumpyWrites) {
  // Double quotes, no trailing comma, key order, scalars, 1-tuples, version
  // 2.0, Python 2 longs.
  const std::string one = Bytes<float>({2.5f});
  for (const std::string& dict :
       {std::string("{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (1,)}"),
        std::string("{'shape': (1,), 'fortran_order': False, 'descr': '<f4'}"),
        std::string("{'descr':'<f4','fortran_order':False,'shape':(1L,),}   "),
        std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (), }")}) {
    for (int major : {1, 2, 3}) {
      absl::StatusOr<HostArray> a = ParseNpy(Npy(dict, one, major), "x.npy");
      PHASOR_ASSERT_OK(a.status());
      EXPECT_THAT(a->values, ElementsAre(2.5)) << dict;
    }
  }
}

TEST(NpyArrayTest, RejectsHeadersNumpyWouldNot) {
  const std::string data = Bytes<float>({1, 2});
  struct Case {
    std::string dict;
    std::string message;
  };
  for (const Case& c : {
           Case{"{'descr': '<f4', 'fortran_order': False}", "no 'shape'"},
           Case{"{'descr': '<f4', 'shape': (2,)}", "no 'fortran_order'"},
           Case{"{'fortran_order': False, 'shape': (2,)}", "no 'descr'"},
           Case{"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}",
                "repeats 'descr'"},
           Case{"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}",
                "unknown key 'x'"},
           Case{"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}",
                "structured"},
           Case{"{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}", "True or False"},
           Case{"{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}", "'shape'"},
           Case{"{'descr': '<f4', 'fortran_order': False, 'shape': (2 3)}", "'shape'"},
           Case{"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x", "after"},
           Case{"'descr': '<f4'", "dict"},
           Case{"{'descr': '>f4', 'fortran_order': False, 'shape': (2,)}",
                "unsupported .npy dtype '>f4'"},
           Case{"{'descr': '<f4', 'fortran_order': True, 'shape': (2,)}", "Fortran"},
           Case{"{'descr': '<f4', 'fortran_order': False, 'shape': (3,)}",
                "needs 12 data bytes, file has 8"},
           Case{"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, "
                "99999999999)}",
                "overflows"},
       }) {
    absl::StatusOr<NpyArray> npy = ParseNpyArray(Npy(c.dict, data), "bad.npy");
    EXPECT_EQ(npy.status().code(), absl::StatusCode::kInvalidArgument) << c.dict;
    EXPECT_THAT(std::string(npy.status().message()), HasSubstr(c.message)) << c.dict;
    EXPECT_THAT(std::string(npy.status().message()), HasSubstr("bad.npy"));
  }
}

TEST(NpyArrayTest, ErrorsQuoteOnlyAFewBytesOfTheFile) {
  const std::string descr(100000, 'x');
  absl::StatusOr<NpyArray> npy = ParseNpyArray(
      Npy("{'descr': '" + descr + "', 'fortran_order': False, 'shape': (0,)}", "", 2),
      "big.npy");
  EXPECT_FALSE(npy.ok());
  EXPECT_LT(npy.status().message().size(), 200u) << npy.status();
}

TEST(NpyArrayTest, TablesNeedFloatingPoint) {
  const std::string file = Npy(
      "{'descr': '<i8', 'fortran_order': False, 'shape': (1,)}", Bytes<int64_t>({7}));
  PHASOR_ASSERT_OK(ParseNpyArray(file, "i.npy").status());
  EXPECT_THAT(std::string(ParseNpy(file, "i.npy").status().message()),
              HasSubstr("unsupported .npy dtype int64"));
}

const std::string kTwoFloats = Bytes<float>({1.5f, -2.5f});

TEST(SafetensorsTest, ReadsAValidFile) {
  absl::StatusOr<HostArray> a = ParseSafetensors(
      Safetensors(R"({"__metadata__": {"format": "pt"},
                      "t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})",
                  kTwoFloats),
      "", "a.safetensors");
  PHASOR_ASSERT_OK(a.status());
  EXPECT_THAT(a->shape, ElementsAre(2));
  EXPECT_THAT(a->values, ElementsAre(1.5, -2.5));
}

TEST(SafetensorsTest, RejectsAmbiguousOrMalformedHeaders) {
  struct Case {
    std::string json;
    std::string message;
  };
  for (const Case& c : {
           Case{R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                    "t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})",
                "repeats a JSON key"},
           Case{R"({"t": {"dtype": "F32", "dtype": "F64", "shape": [2],
                          "data_offsets": [0, 8]}})",
                "repeats a JSON key"},
           Case{R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]})",
                "not a valid JSON object"},
           Case{R"([1, 2])", "not a valid JSON object"},
           Case{"{\"t\xff\": 1}", "not a valid JSON object"},  // Not UTF-8.
           Case{R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]},
                    "u": {"dtype": "F32", "shape": [1], "data_offsets": [2, 8]}})",
                "overlap at byte 2"},
           Case{R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                    "u": {"dtype": "F32", "shape": [0], "data_offsets": [8, 8]}})",
                "gap at byte 4"},
           Case{R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})",
                "tensors end at byte 4 of a 8-byte data buffer"},
           Case{R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})",
                "no valid data_offsets"},
           Case{R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [-1, 8]}})",
                "no valid data_offsets"},
           Case{R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8.5]}})",
                "no valid data_offsets"},
           Case{R"({"t": {"dtype": "I32", "shape": [2], "data_offsets": [0, 8]}})",
                "has dtype I32"},
           Case{R"({"t": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})",
                "shape needs 12 bytes, data_offsets give 8"},
           Case{R"({"t": {"dtype": "F32", "shape": [2147483648, 2147483648],
                          "data_offsets": [0, 8]}})",
                "shape needs more than 8 bytes"},
           Case{R"({"t": {"shape": [2], "data_offsets": [0, 8]}})",
                "lacks dtype, shape or data_offsets"},
           Case{R"({"__metadata__": {"a": "b"}})", "tensors end at byte 0"},
       }) {
    absl::StatusOr<HostArray> a =
        ParseSafetensors(Safetensors(c.json, kTwoFloats), "", "b.safetensors");
    EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument) << c.json;
    EXPECT_THAT(std::string(a.status().message()), HasSubstr(c.message)) << c.json;
    EXPECT_THAT(std::string(a.status().message()), HasSubstr("b.safetensors"));
  }
}

TEST(SafetensorsTest, BoundsNestingAndHeaderSize) {
  std::string deep = R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                         "__metadata__": {"x": )";
  deep += std::string(1000, '[') + std::string(1000, ']') + "}}";
  EXPECT_THAT(
      std::string(ParseSafetensors(Safetensors(deep, kTwoFloats), "t", "d").status().message()),
      HasSubstr("deeper than 16"));

  // A size field claiming 2^40 bytes is refused before anything is read.
  std::string huge(8, '\0');
  huge[5] = 1;
  EXPECT_THAT(std::string(ParseSafetensors(huge, "", "h").status().message()),
              HasSubstr("exceeds the format's limit"));
}

TEST(SafetensorsTest, UnknownNamesAreNotFoundAndQuotedBriefly) {
  const std::string file = Safetensors(
      R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", kTwoFloats);
  absl::StatusOr<HostArray> a = ParseSafetensors(file, std::string(5000, 'n'), "f");
  EXPECT_EQ(a.status().code(), absl::StatusCode::kNotFound);
  EXPECT_LT(a.status().message().size(), 200u);
  EXPECT_EQ(ParseSafetensors(file, "__metadata__", "f").status().code(),
            absl::StatusCode::kNotFound);
}

// Whole files: NumPy and safetensors tables read, truncated or corrupted
// files rejected, never a crash.
namespace whole_files {

using ::testing::ElementsAre;

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

}  // namespace whole_files

}  // namespace
}  // namespace phasor
