// Shared pieces of the Open Inference Protocol tests
// (inference_service_test.cc, inference_parity_test.cc): the profiles every
// test server loads, tensors of each dtype as raw inputs, BYTES contents as
// Triton's clients write them, the conversion of a raw request to typed
// contents, and a fixture with a server and an inference stub.
#ifndef PHASOR_TESTS_SERVER_INFERENCE_TEST_UTIL_H_
#define PHASOR_TESTS_SERVER_INFERENCE_TEST_UTIL_H_

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "inference/grpc_service.grpc.pb.h"
#include "phasor/v1/encoder.pb.h"
#include "tests/server/test_util.h"

namespace phasor::server::testing {

using inference::ModelInferRequest;
using inference::ModelInferResponse;

inline constexpr int kTableRows = 16;
inline constexpr int kTableDim = 4;
inline constexpr int kBuckets = 32;
inline constexpr int kHeads = 3;
constexpr int64_t kNs = 1000000000;
// 2026-03-08 06:00 UTC.
constexpr int64_t kStart = int64_t{1772949600} * kNs;

inline constexpr char kProfiles[] = R"pb(
  profile {
    name: "sin"
    spec { positional { sinusoidal { dim: 8 } } }
  }
  profile {
    name: "learned"
    spec { positional { learned { table: "wpe" } } }
    learned_tables { name: "wpe" file { path: "wpe.npy" } }
  }
  profile {
    name: "rope"
    spec { rope { rotary_dim: 8 } }
  }
  profile {
    name: "vitals"
    spec {
      temporal {
        content {}
        time { dim: 4 min_period_seconds: 60 max_period_seconds: 86400 }
        gaps {}
        calendar { time_zone: "Europe/Paris" fields: HOUR_OF_DAY fields: DAY_OF_WEEK }
      }
    }
  }
  profile {
    name: "clock"
    spec {
      temporal {
        time { dim: 4 min_period_seconds: 60 max_period_seconds: 86400 }
        calendar { fields: HOUR_OF_DAY fields: DAY_OF_WEEK }
      }
    }
  }
  profile {
    name: "t5"
    spec { relative_bias { t5 { num_buckets: 32 max_distance: 128 } table: "t5rel" } }
    learned_tables { name: "t5rel" file { path: "t5.npy" } }
  }
  profile {
    name: "shaw"
    spec { relative_bias { shaw { max_relative_position: 2 } } }
  }
)pb";


template <typename T>
std::string Raw(const std::vector<T>& values) {
  std::string bytes(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// Deterministic test values in [-1, 1).
float Value(int64_t i);
// Values of `shape` as a phasor.v1.Tensor of a float `dtype`.
v1::Tensor FloatValues(v1::DType dtype, std::vector<int64_t> shape);
v1::Tensor Int64Values(const std::vector<int64_t>& values);
// The protocol's name of `dtype`, spelled out here rather than taken from
// the server's table.
const char* Datatype(v1::DType dtype);
// Appends input `name` carrying `tensor`'s bytes as raw contents.
void AddInput(ModelInferRequest* request, const std::string& name, const v1::Tensor& tensor);
// Length-prefixed BYTES raw contents (as Triton's clients write them).
std::string BytesRaw(const std::vector<std::string>& elements);
void AddBytesInput(ModelInferRequest* request, const std::string& name,
                   const std::vector<std::string>& elements);
std::vector<std::string> DecodeBytes(const std::string& raw);
// Index of output `name`; -1 when absent.
int OutputIndex(const ModelInferResponse& response, const std::string& name);
// The output `name` has `native`'s datatype, shape and exact bytes.
void ExpectSameTensor(const ModelInferResponse& response, const std::string& name,
                      const v1::Tensor& native);
v1::SeriesState StateOf(const std::string& bytes);
// The field of the first google.rpc.BadRequest violation; "" without one.
std::string FieldOf(const grpc::Status& status);
// A [rows, cols] learned table.
std::vector<float> Table(int rows, int cols);
// `request` with every raw input turned into typed contents.
ModelInferRequest ToTyped(ModelInferRequest request);
// A valid request for model "rope": query [2, 1, 8] FP32, positions [2].
ModelInferRequest RopeRequest();

// A server with kProfiles (and their table files) and a stub for it.
class InferenceTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(TestOptions()); }

  void Start(ServerOptions options) {
    dir_.WriteFile("wpe.npy", NpyFloat32(Table(kTableRows, kTableDim), kTableRows, kTableDim));
    dir_.WriteFile("t5.npy", NpyFloat32(Table(kBuckets, kHeads), kBuckets, kHeads));
    options.profiles_path = dir_.WriteFile("profiles.txtpb", kProfiles);
    server_ = StartTestServer(options);
    ASSERT_NE(server_.server, nullptr);
    oip_ = inference::GRPCInferenceService::NewStub(server_.channel);
  }

  grpc::Status Infer(const ModelInferRequest& request, ModelInferResponse* response) {
    return oip_->ModelInfer(Context().get(), request, response);
  }

  // ModelInfer that must succeed.
  ModelInferResponse InferOk(const ModelInferRequest& request) {
    ModelInferResponse response;
    const grpc::Status status = Infer(request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  // ModelInfer that must fail with `code` at field path `field`.
  grpc::Status InferFails(const ModelInferRequest& request, grpc::StatusCode code,
                          const std::string& field) {
    ModelInferResponse response;
    const grpc::Status status = Infer(request, &response);
    EXPECT_EQ(status.error_code(), code) << status.error_message();
    EXPECT_EQ(FieldOf(status), field) << status.error_message();
    return status;
  }

  TempDir dir_;
  TestServer server_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> oip_;
};

}  // namespace phasor::server::testing

#endif  // PHASOR_TESTS_SERVER_INFERENCE_TEST_UTIL_H_
