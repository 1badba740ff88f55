// Shared helpers for the server tests: an in-process PhasorServer on a free
// loopback port with a real channel, tensor packing, error-detail decoding,
// and a minimal HTTP GET for /metrics.
#ifndef PHASOR_TESTS_SERVER_TEST_UTIL_H_
#define PHASOR_TESTS_SERVER_TEST_UTIL_H_

#include <sys/types.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include "absl/types/span.h"
#include "google/rpc/error_details.pb.h"
#include "phasor/v1/encoder.grpc.pb.h"
#include "server/options.h"
#include "server/server.h"

namespace phasor::server::testing {

// Options for a test server: loopback, any free port, metrics off, 4 MiB
// message limit.
ServerOptions TestOptions();

// A started server plus a channel and stub connected to it.
struct TestServer {
  std::unique_ptr<PhasorServer> server;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Encoder::Stub> stub;
  std::string address;  // 127.0.0.1:port
};

// Starts `options` (asserting success) and connects an insecure channel whose
// message limits are 64 MiB, so server-side limits are the ones tested.
TestServer StartTestServer(const ServerOptions& options);

// A context with a 30 s deadline.
std::unique_ptr<grpc::ClientContext> Context();

// Expects a small EncodePositions call to succeed: the server still serves.
void ExpectServing(v1::Encoder::Stub& stub);

v1::Tensor FloatTensor(absl::Span<const float> values,
                       std::vector<int64_t> shape);
v1::Tensor Int64Tensor(absl::Span<const int64_t> values,
                       std::vector<int64_t> shape);
v1::Tensor Float64Tensor(absl::Span<const double> values,
                         std::vector<int64_t> shape);
// The data of a FLOAT32 tensor.
std::vector<float> Floats(const v1::Tensor& tensor);

// The google.rpc.BadRequest carried by `status`; empty when absent.
google::rpc::BadRequest BadRequestOf(const grpc::Status& status);

// GET http://127.0.0.1:port/path; returns the body ("" on failure).
std::string HttpGet(int port, const std::string& path);

// The value of the Prometheus sample whose line starts with `series`
// (metric name and labels exactly as exposed); -1 when absent.
double MetricValue(const std::string& text, const std::string& series);

// --- Raw calls ---------------------------------------------------------------
// For bytes no generated stub would send, and for services called through
// grpc::GenericStub: requests are encoded by hand (health's is one string
// field) and responses read with protobuf's UnknownFieldSet.

inline void* Tag(intptr_t i) { return reinterpret_cast<void*>(i); }
// Expects the next event of `cq` to be `expected`; returns its ok.
bool Await(grpc::CompletionQueue* cq, void* expected);
// Shuts `cq` down and discards what is left in it.
void Drain(grpc::CompletionQueue* cq);
grpc::ByteBuffer ToBuffer(const std::string& bytes);
std::string FromBuffer(const grpc::ByteBuffer& buffer);
// A length-delimited field `number` holding `value` (< 128 bytes).
std::string StringField(int number, const std::string& value);
// A unary call of `method` with raw request bytes; the response bytes go to
// `response` (may be null) when the call succeeds.
grpc::Status GenericUnary(const std::shared_ptr<grpc::Channel>& channel,
                          const std::string& method, const std::string& request,
                          std::string* response, const std::string& authorization = "");
// grpc.health.v1.Health/Watch of `service`, started on `cq` with its
// request sent (tags 1 and 2 used and awaited).
std::unique_ptr<grpc::GenericClientAsyncReaderWriter> StartHealthWatch(
    grpc::GenericStub* stub, grpc::ClientContext* context, grpc::CompletionQueue* cq,
    const std::string& service);

// --- The phasor-server binary ---------------------------------------------------

// A phasor-server process started by Spawn, its stderr readable.
struct Child {
  pid_t pid = -1;
  FILE* stderr_stream = nullptr;
};

// Starts the phasor-server binary with `args` and the extra environment `env`
// (the test's own PHASOR_* variables are dropped), capturing its stderr.
Child Spawn(const std::vector<std::string>& args, const std::vector<std::string>& env);
// Reads stderr lines into `all` until one contains `needle` (returned) or
// EOF ("").
std::string ReadUntil(Child& child, const std::string& needle, std::string* all);
// The gRPC port from the "serving" log record ("... event=serving
// grpc_port=N ..."); 0 if the server never wrote it.
int ReadPort(Child& child, std::string* all);
// Reads the rest of its stderr, then waits for the process: its exit code,
// or -1 if a signal ended it. A non-zero end prints the stderr tail.
int WaitExit(Child& child);

// A temporary directory removed at destruction.
class TempDir final {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  // Writes `contents` to path()/name and returns the full path.
  std::string WriteFile(const std::string& name, const std::string& contents) const;

 private:
  std::string path_;
};

// A little-endian float32 .npy file holding `values` with shape [rows, cols],
// or [rows] when cols < 0.
std::string NpyFloat32(const std::vector<float>& values, int64_t rows,
                       int64_t cols = -1);

}  // namespace phasor::server::testing

#endif  // PHASOR_TESTS_SERVER_TEST_UTIL_H_
