#include "test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"

extern char** environ;

namespace phasor::server::testing {

ServerOptions TestOptions() {
  ServerOptions options;
  options.grpc_address = "127.0.0.1:0";
  options.metrics_address = "";
  // gRPC's usual 4 MiB rather than the server's 64 MiB default: the limit
  // tests reach it with small requests.
  options.max_message_bytes = int64_t{4} << 20;
  options.threads = 2;
  options.shutdown_grace = absl::Seconds(5);
  return options;
}

TestServer StartTestServer(const ServerOptions& options) {
  TestServer out;
  absl::StatusOr<std::unique_ptr<PhasorServer>> server = PhasorServer::Start(options);
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return out;
  out.server = *std::move(server);
  out.address = absl::StrCat("127.0.0.1:", out.server->grpc_port());
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(64 << 20);
  arguments.SetMaxSendMessageSize(64 << 20);
  out.channel = grpc::CreateCustomChannel(
      out.address, grpc::InsecureChannelCredentials(), arguments);
  out.stub = v1::Encoder::NewStub(out.channel);
  return out;
}

std::unique_ptr<grpc::ClientContext> Context() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  return context;
}

void ExpectServing(v1::Encoder::Stub& stub) {
  v1::EncodePositionsRequest request;
  request.mutable_positions()->mutable_range()->set_count(4);
  request.mutable_spec()->mutable_positional()->mutable_sinusoidal()->set_dim(8);
  v1::EncodePositionsResponse response;
  const grpc::Status status = stub.EncodePositions(Context().get(), request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.encodings().data().size(), 4u * 8 * 4);
}

namespace {

template <typename T>
v1::Tensor MakeTensor(absl::Span<const T> values, std::vector<int64_t> shape,
                      v1::DType dtype) {
  v1::Tensor tensor;
  for (int64_t extent : shape) tensor.add_shape(extent);
  tensor.set_dtype(dtype);
  tensor.set_data(std::string(reinterpret_cast<const char*>(values.data()),
                              values.size() * sizeof(T)));
  return tensor;
}

}  // namespace

v1::Tensor FloatTensor(absl::Span<const float> values, std::vector<int64_t> shape) {
  return MakeTensor(values, std::move(shape), v1::FLOAT32);
}
v1::Tensor Int64Tensor(absl::Span<const int64_t> values, std::vector<int64_t> shape) {
  return MakeTensor(values, std::move(shape), v1::INT64);
}
v1::Tensor Float64Tensor(absl::Span<const double> values, std::vector<int64_t> shape) {
  return MakeTensor(values, std::move(shape), v1::FLOAT64);
}

std::vector<float> Floats(const v1::Tensor& tensor) {
  EXPECT_EQ(tensor.dtype(), v1::FLOAT32);
  std::vector<float> out(tensor.data().size() / sizeof(float));
  std::memcpy(out.data(), tensor.data().data(), out.size() * sizeof(float));
  return out;
}

google::rpc::BadRequest BadRequestOf(const grpc::Status& status) {
  google::rpc::BadRequest bad_request;
  google::rpc::Status rpc_status;
  if (!rpc_status.ParseFromString(status.error_details())) return bad_request;
  for (const google::protobuf::Any& detail : rpc_status.details()) {
    if (detail.UnpackTo(&bad_request)) break;
  }
  return bad_request;
}

std::string HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return "";
  }
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
  if (send(fd, request.data(), request.size(), 0) !=
      static_cast<ssize_t>(request.size())) {
    close(fd);
    return "";
  }
  std::string response;
  char buffer[4096];
  ssize_t n;
  while ((n = recv(fd, buffer, sizeof(buffer), 0)) > 0) response.append(buffer, n);
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  return body == std::string::npos ? "" : response.substr(body + 4);
}

double MetricValue(const std::string& text, const std::string& series) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (line.size() > series.size() && line.substr(0, series.size()) == series &&
        line[series.size()] == ' ') {
      return std::stod(std::string(line.substr(series.size() + 1)));
    }
  }
  return -1;
}

TempDir::TempDir() {
  std::string pattern =
      (std::filesystem::temp_directory_path() / "phasor_server_test_XXXXXX").string();
  char* made = mkdtemp(pattern.data());
  EXPECT_NE(made, nullptr);
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string TempDir::WriteFile(const std::string& name,
                               const std::string& contents) const {
  const std::string full = absl::StrCat(path_, "/", name);
  std::ofstream out(full, std::ios::binary);
  out << contents;
  return full;
}

std::string NpyFloat32(const std::vector<float>& values, int64_t rows, int64_t cols) {
  // numpy.lib.format version 1.0: magic, version, uint16 header length, a
  // dict literal padded with spaces to a multiple of 64 bytes, then data.
  const std::string shape =
      cols < 0 ? absl::StrCat(rows, ",") : absl::StrCat(rows, ", ", cols);
  std::string header = absl::StrCat(
      "{'descr': '<f4', 'fortran_order': False, 'shape': (", shape, "), }");
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>(header.size() >> 8));
  out += header;
  out.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  return out;
}

bool Await(grpc::CompletionQueue* cq, void* expected) {
  void* tag = nullptr;
  bool ok = false;
  EXPECT_TRUE(cq->Next(&tag, &ok));
  EXPECT_EQ(tag, expected);
  return ok;
}

void Drain(grpc::CompletionQueue* cq) {
  cq->Shutdown();
  void* tag;
  bool ok;
  while (cq->Next(&tag, &ok)) {
  }
}

grpc::ByteBuffer ToBuffer(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

std::string FromBuffer(const grpc::ByteBuffer& buffer) {
  grpc::Slice slice;
  EXPECT_TRUE(buffer.DumpToSingleSlice(&slice).ok());
  return std::string(reinterpret_cast<const char*>(slice.begin()), slice.size());
}

std::string StringField(int number, const std::string& value) {
  std::string out;
  out.push_back(static_cast<char>(number << 3 | 2));
  out.push_back(static_cast<char>(value.size()));
  return out + value;
}

grpc::Status GenericUnary(const std::shared_ptr<grpc::Channel>& channel,
                          const std::string& method, const std::string& request,
                          std::string* response, const std::string& authorization) {
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  auto context = Context();
  if (!authorization.empty()) context->AddMetadata("authorization", authorization);
  auto call = stub.PrepareUnaryCall(context.get(), method, ToBuffer(request), &cq);
  call->StartCall();
  grpc::ByteBuffer buffer;
  grpc::Status status;
  call->Finish(&buffer, &status, Tag(1));
  Await(&cq, Tag(1));
  if (status.ok() && response != nullptr) *response = FromBuffer(buffer);
  Drain(&cq);
  return status;
}

std::unique_ptr<grpc::GenericClientAsyncReaderWriter> StartHealthWatch(
    grpc::GenericStub* stub, grpc::ClientContext* context, grpc::CompletionQueue* cq,
    const std::string& service) {
  auto watch = stub->PrepareCall(context, "/grpc.health.v1.Health/Watch", cq);
  watch->StartCall(Tag(1));
  EXPECT_TRUE(Await(cq, Tag(1)));
  watch->Write(ToBuffer(StringField(1, service)), Tag(2));
  EXPECT_TRUE(Await(cq, Tag(2)));
  return watch;
}

Child Spawn(const std::vector<std::string>& args, const std::vector<std::string>& env) {
  std::vector<std::string> env_storage(env);
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "PHASOR_", 7) != 0) env_storage.emplace_back(*e);
  }
  std::vector<char*> envp;
  for (std::string& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_storage = {PHASOR_SERVER_BINARY};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);

  int pipe_fds[2];
  EXPECT_EQ(pipe(pipe_fds), 0);
  Child child;
  child.pid = fork();
  if (child.pid == 0) {
    dup2(pipe_fds[1], STDERR_FILENO);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  close(pipe_fds[1]);
  child.stderr_stream = fdopen(pipe_fds[0], "r");
  return child;
}

std::string ReadUntil(Child& child, const std::string& needle, std::string* all) {
  char line[4096];
  while (std::fgets(line, sizeof(line), child.stderr_stream) != nullptr) {
    all->append(line);
    if (std::strstr(line, needle.c_str()) != nullptr) return line;
  }
  return "";
}

int ReadPort(Child& child, std::string* all) {
  // The "serving" record (text log format, server/logging.h):
  //   time=... level=info event=serving grpc_port=41234 metrics_port=0
  const std::string line = ReadUntil(child, " event=serving ", all);
  const size_t at = line.find(" grpc_port=");
  return at == std::string::npos ? 0 : std::atoi(line.c_str() + at + 11);
}

int WaitExit(Child& child) {
  // What the process still writes is read to its end first, so that a
  // process blocked on a full stderr pipe can finish, and so that a failed
  // exit shows its cause (a sanitizer report, a log record) in the test's
  // output.
  std::string rest;
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof(buffer), child.stderr_stream)) > 0) {
    rest.append(buffer, n);
  }
  int status = 0;
  waitpid(child.pid, &status, 0);
  std::fclose(child.stderr_stream);
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code != 0) {
    constexpr size_t kTail = 16 << 10;
    std::fprintf(stderr, "phasor-server pid %d ended with %s %d; its stderr ends with:\n%s\n",
                 static_cast<int>(child.pid), WIFEXITED(status) ? "exit code" : "signal",
                 WIFEXITED(status) ? code : WTERMSIG(status),
                 rest.substr(rest.size() > kTail ? rest.size() - kTail : 0).c_str());
  }
  return code;
}

}  // namespace phasor::server::testing
