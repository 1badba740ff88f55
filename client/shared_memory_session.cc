#include "client/shared_memory_session.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/inference_wire.h"
#include "client/tensor_io.h"
#include "google/protobuf/util/json_util.h"

namespace phasor {
namespace {

// Tensors start on cache-line boundaries (and so on every element size's).
constexpr int64_t kAlignmentBytes = 64;

int64_t Aligned(int64_t offset) {
  return (offset + kAlignmentBytes - 1) / kAlignmentBytes * kAlignmentBytes;
}


std::string ShapeText(absl::Span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

// The bytes dtype and shape call for; INVALID_ARGUMENT naming `field` on an
// unknown dtype, a negative dimension or overflow.
absl::StatusOr<int64_t> TensorBytes(v1::DType dtype,
                                    absl::Span<const int64_t> shape,
                                    absl::string_view field) {
  const int64_t element_bytes = DTypeBytes(dtype);
  if (element_bytes == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".dtype: must be set to a known dtype"));
  }
  int64_t bytes = element_bytes;
  for (const int64_t dim : shape) {
    if (dim < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".shape: ", ShapeText(shape), " has a negative dimension"));
    }
    if (dim != 0 && bytes > std::numeric_limits<int64_t>::max() / dim) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".shape: ", ShapeText(shape), " overflows int64 bytes"));
    }
    bytes *= dim;
  }
  return bytes;
}

absl::Status CheckTensor(const TensorRef& tensor, absl::string_view field) {
  absl::StatusOr<int64_t> bytes = TensorBytes(tensor.dtype, tensor.shape, field);
  if (!bytes.ok()) return bytes.status();
  if (*bytes != static_cast<int64_t>(tensor.data.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".data: ", tensor.data.size(), " bytes, but ",
        DTypeString(tensor.dtype), " ", ShapeText(tensor.shape), " takes ",
        *bytes));
  }
  return absl::OkStatus();
}


// The extension's three parameters on an input or requested output.
void PointAt(google::protobuf::Map<std::string, inference::InferParameter>* parameters,
             absl::string_view region, int64_t offset, int64_t byte_size) {
  (*parameters)["shared_memory_region"].set_string_param(std::string(region));
  (*parameters)["shared_memory_offset"].set_int64_param(offset);
  (*parameters)["shared_memory_byte_size"].set_int64_param(byte_size);
}

// `status` with `context` before its message; code and payloads kept.
absl::Status Prefixed(const absl::Status& status, absl::string_view context,
                      absl::string_view suffix = "") {
  absl::Status out(status.code(), absl::StrCat(context, status.message(), suffix));
  status.ForEachPayload([&out](absl::string_view type_url, const absl::Cord& payload) {
    out.SetPayload(type_url, payload);
  });
  return out;
}

// What a refused registration most likely means, for its message.
absl::string_view RegisterHint(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kUnimplemented:
      return " (the server has system shared memory disabled: start "
             "phasor-server with --system_shared_memory=true)";
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kDeadlineExceeded:
      return "";
    default:
      return " (shared memory needs the server on this host, and the "
             "session's key_prefix equal to the server's "
             "--shared_memory_key_prefix)";
  }
}

std::string RandomHex() {
  std::random_device device;
  return absl::StrFormat("%08x", static_cast<uint32_t>(device()));
}

}  // namespace

v1::Tensor SharedTensor::ToTensor() const {
  v1::Tensor tensor;
  tensor.set_dtype(dtype);
  for (const int64_t dim : shape) tensor.add_shape(dim);
  tensor.set_data(data.data(), data.size());
  return tensor;
}

// One POSIX shared-memory object, created exclusively and mapped read-write.
// Unmapped when the last holder (the session, or a SharedTensor view) lets
// go; unlinked by the session when it drops the region, or here at the
// latest.
class SharedMemorySession::Region final {
 public:
  static absl::StatusOr<std::shared_ptr<Region>> Create(std::string key,
                                                        int64_t byte_size) {
    const int fd = shm_open(key.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0) {
      return absl::ErrnoToStatus(errno, absl::StrCat("shm_open of ", key));
    }
    if (ftruncate(fd, static_cast<off_t>(byte_size)) != 0) {
      const int error = errno;
      close(fd);
      shm_unlink(key.c_str());
      return absl::ErrnoToStatus(
          error, absl::StrCat("ftruncate of ", key, " to ", byte_size, " bytes"));
    }
    void* base = mmap(nullptr, static_cast<size_t>(byte_size),
                      PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    const int error = errno;
    close(fd);  // The mapping keeps the object open.
    if (base == MAP_FAILED) {
      shm_unlink(key.c_str());
      return absl::ErrnoToStatus(
          error, absl::StrCat("mmap of ", key, " (", byte_size, " bytes)"));
    }
    return std::shared_ptr<Region>(
        new Region(std::move(key), static_cast<char*>(base), byte_size));
  }

  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;
  ~Region() {
    Unlink();
    munmap(base_, static_cast<size_t>(byte_size_));
  }

  void Unlink() {
    if (!unlinked_) shm_unlink(key_.c_str());
    unlinked_ = true;
  }

  const std::string& key() const { return key_; }
  // The registered name: the key without its "/".
  absl::string_view name() const { return absl::string_view(key_).substr(1); }
  char* base() const { return base_; }
  int64_t byte_size() const { return byte_size_; }
  bool Contains(const char* p) const {
    return p >= base_ && p < base_ + byte_size_;
  }

 private:
  Region(std::string key, char* base, int64_t byte_size)
      : key_(std::move(key)), base_(base), byte_size_(byte_size) {}

  const std::string key_;
  char* const base_;
  const int64_t byte_size_;
  bool unlinked_ = false;
};

// One input: wire name, datatype, shape and bytes (`owned` holds them when
// the session built them: BYTES elements, a probe's offsets).
struct SharedMemorySession::Input {
  std::string name;
  std::string datatype;
  std::vector<int64_t> shape;
  absl::string_view bytes;
  std::shared_ptr<const std::string> owned;
};

// One requested output: byte_size >= 0 reserves that many bytes of the
// region for it; -1 asks for it in the reply message.
struct SharedMemorySession::Output {
  std::string name;
  int64_t byte_size = -1;
};

struct SharedMemorySession::Reply {
  inference::ModelInferResponse response;
  // Outputs in the region, by name.
  absl::flat_hash_map<std::string, SharedTensor> shared;
  // Outputs in the reply: their index in response.raw_output_contents.
  absl::flat_hash_map<std::string, int> raw;
};

absl::StatusOr<std::unique_ptr<SharedMemorySession>> SharedMemorySession::Create(
    SharedMemoryTransport transport, SharedMemorySessionOptions options) {
  const std::string& prefix = options.key_prefix;
  if (prefix.size() < 2 || prefix[0] != '/' ||
      prefix.find('/', 1) != std::string::npos ||
      prefix.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(
        "key_prefix: must be a POSIX shared-memory name, '/' then no further "
        "'/' (the server's --shared_memory_key_prefix, \"/phasor\" by default)");
  }
  if (options.min_region_bytes <= 0) {
    return absl::InvalidArgumentError("min_region_bytes: must be positive");
  }
  if (transport.channel == nullptr || !transport.prepare_context ||
      !transport.from_grpc_status) {
    return absl::InvalidArgumentError(
        "transport: needs a channel, prepare_context and from_grpc_status "
        "(EncoderClient::SharedMemory fills them)");
  }
  return std::unique_ptr<SharedMemorySession>(
      new SharedMemorySession(std::move(transport), std::move(options)));
}

SharedMemorySession::SharedMemorySession(SharedMemoryTransport transport,
                                         SharedMemorySessionOptions options)
    : transport_(std::move(transport)),
      options_(std::move(options)),
      stub_(inference::GRPCInferenceService::NewStub(transport_.channel)),
      key_stem_(absl::StrCat(options_.key_prefix, "_", getpid(), "_", RandomHex())) {}

SharedMemorySession::~SharedMemorySession() { Close().IgnoreError(); }

absl::Status SharedMemorySession::Call(
    const std::function<grpc::Status(grpc::ClientContext*)>& call) const {
  grpc::ClientContext context;
  transport_.prepare_context(&context);
  const grpc::Status status = call(&context);
  if (status.ok()) return absl::OkStatus();
  return transport_.from_grpc_status(status);
}

absl::Status SharedMemorySession::Close() {
  absl::MutexLock lock(&mu_);
  if (closed_) return absl::OkStatus();
  closed_ = true;
  widths_.clear();
  return DropRegion();
}

std::string SharedMemorySession::region_key() const {
  absl::MutexLock lock(&mu_);
  return region_ != nullptr ? region_->key() : std::string();
}

int64_t SharedMemorySession::region_bytes() const {
  absl::MutexLock lock(&mu_);
  return region_ != nullptr ? region_->byte_size() : 0;
}

absl::StatusOr<std::vector<SharedMemoryRegionStatus>>
SharedMemorySession::ServerRegions() const {
  inference::SystemSharedMemoryStatusResponse response;
  absl::Status status = Call([&](grpc::ClientContext* context) {
    return stub_->SystemSharedMemoryStatus(
        context, inference::SystemSharedMemoryStatusRequest(), &response);
  });
  if (!status.ok()) return status;
  std::vector<SharedMemoryRegionStatus> regions;
  for (const auto& [name, region] : response.regions()) {
    regions.push_back({name, region.key(), region.offset(), region.byte_size()});
  }
  return regions;
}

absl::Status SharedMemorySession::DropRegion() {
  std::shared_ptr<Region> region = std::move(region_);
  region_ = nullptr;
  if (region == nullptr) return absl::OkStatus();
  inference::SystemSharedMemoryUnregisterRequest request;
  request.set_name(std::string(region->name()));
  inference::SystemSharedMemoryUnregisterResponse response;
  const absl::Status status = Call([&](grpc::ClientContext* context) {
    return stub_->SystemSharedMemoryUnregister(context, request, &response);
  });
  // Unlinked now; unmapped when the last view of it goes.
  region->Unlink();
  if (!status.ok()) {
    return Prefixed(status, absl::StrCat("SystemSharedMemoryUnregister of ",
                                         region->name(), " failed: "));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<SharedMemorySession::Region>>
SharedMemorySession::Reserve(int64_t byte_size) {
  if (closed_) {
    return absl::FailedPreconditionError("SharedMemorySession is closed");
  }
  if (region_ != nullptr && region_->byte_size() >= byte_size) return region_;
  int64_t size = std::max(byte_size, options_.min_region_bytes);
  if (region_ != nullptr) size = std::max(size, 2 * region_->byte_size());
  const int64_t page = sysconf(_SC_PAGESIZE);
  size = (size + page - 1) / page * page;
  if (absl::Status dropped = DropRegion(); !dropped.ok()) return dropped;

  std::string key = absl::StrCat(key_stem_, "_", generation_++);
  absl::StatusOr<std::shared_ptr<Region>> region = Region::Create(key, size);
  if (!region.ok()) return region.status();
  inference::SystemSharedMemoryRegisterRequest request;
  request.set_name(std::string((*region)->name()));
  request.set_key((*region)->key());
  request.set_offset(0);
  request.set_byte_size(static_cast<uint64_t>(size));
  inference::SystemSharedMemoryRegisterResponse response;
  const absl::Status status = Call([&](grpc::ClientContext* context) {
    return stub_->SystemSharedMemoryRegister(context, request, &response);
  });
  if (!status.ok()) {
    (*region)->Unlink();
    return Prefixed(status,
                    absl::StrCat("SystemSharedMemoryRegister of ", key, " (",
                                 size, " bytes) failed: "),
                    RegisterHint(status.code()));
  }
  region_ = *region;
  return region_;
}

absl::StatusOr<SharedMemorySession::Reply> SharedMemorySession::Infer(
    absl::string_view model, const std::vector<Input>& inputs,
    const std::vector<Output>& outputs,
    const google::protobuf::Map<std::string, inference::InferParameter>& parameters,
    bool copy) {
  // Layout: the inputs, then the outputs sized in advance, each aligned.
  std::vector<int64_t> input_offsets;
  int64_t at = 0;
  for (const Input& input : inputs) {
    input_offsets.push_back(at);
    at = Aligned(at + static_cast<int64_t>(input.bytes.size()));
  }
  std::vector<int64_t> output_offsets;
  for (const Output& output : outputs) {
    output_offsets.push_back(at);
    if (output.byte_size >= 0) at = Aligned(at + output.byte_size);
  }
  // An input that is a view of this session's region (a result fed back)
  // would be overwritten by the layout: such inputs are copied out first.
  std::vector<std::string> moved_out(inputs.size());
  std::vector<absl::string_view> sources(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    sources[i] = inputs[i].bytes;
    if (region_ != nullptr && !sources[i].empty() &&
        region_->Contains(sources[i].data())) {
      moved_out[i] = std::string(sources[i]);
      sources[i] = moved_out[i];
    }
  }
  absl::StatusOr<std::shared_ptr<Region>> reserved = Reserve(std::max<int64_t>(at, 1));
  if (!reserved.ok()) return reserved.status();
  const std::shared_ptr<Region> region = *std::move(reserved);

  inference::ModelInferRequest request;
  request.set_model_name(std::string(model));
  *request.mutable_parameters() = parameters;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Input& input = inputs[i];
    auto* message = request.add_inputs();
    message->set_name(input.name);
    message->set_datatype(input.datatype);
    for (const int64_t dim : input.shape) message->add_shape(dim);
    if (!sources[i].empty()) {
      std::memcpy(region->base() + input_offsets[i], sources[i].data(),
                  sources[i].size());
    }
    PointAt(message->mutable_parameters(), region->name(), input_offsets[i],
            static_cast<int64_t>(sources[i].size()));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    auto* message = request.add_outputs();
    message->set_name(outputs[i].name);
    if (outputs[i].byte_size >= 0) {
      PointAt(message->mutable_parameters(), region->name(), output_offsets[i],
              outputs[i].byte_size);
    }
  }

  Reply reply;
  const absl::Status status = Call([&](grpc::ClientContext* context) {
    return stub_->ModelInfer(context, request, &reply.response);
  });
  if (!status.ok()) return status;

  const inference::ModelInferResponse& response = reply.response;
  // Raw contents: one per output (those in shared memory empty), or one
  // per output not in shared memory.
  const bool aligned_raw =
      response.raw_output_contents_size() == response.outputs_size();
  int raw_index = 0;
  for (int o = 0; o < response.outputs_size(); ++o) {
    const auto& output = response.outputs(o);
    size_t requested = 0;
    while (requested < outputs.size() && outputs[requested].name != output.name()) {
      ++requested;
    }
    const std::string field = absl::StrCat("outputs[", output.name(), "]");
    if (requested == outputs.size()) {
      return absl::DataLossError(
          absl::StrCat(field, ": the server answered an output not asked for"));
    }
    if (outputs[requested].byte_size < 0) {
      const int index = aligned_raw ? o : raw_index;
      ++raw_index;
      if (index >= response.raw_output_contents_size()) {
        return absl::DataLossError(
            absl::StrCat(field, ": the reply has no raw contents for it"));
      }
      reply.raw[output.name()] = index;
      continue;
    }
    if (aligned_raw && !response.raw_output_contents(o).empty()) {
      return absl::DataLossError(absl::StrCat(
          field, ": the server sent raw contents for an output in shared memory"));
    }
    SharedTensor tensor;
    tensor.dtype = DTypeOfInferenceDatatype(output.datatype());
    tensor.shape.assign(output.shape().begin(), output.shape().end());
    absl::StatusOr<int64_t> bytes = TensorBytes(tensor.dtype, tensor.shape, field);
    if (!bytes.ok() || *bytes > outputs[requested].byte_size) {
      return absl::DataLossError(absl::StrCat(
          field, ": the server answered ", output.datatype(), " ",
          ShapeText(tensor.shape), ", which does not fit the ",
          outputs[requested].byte_size, " bytes asked for"));
    }
    const char* data = region->base() + output_offsets[requested];
    if (copy) {
      auto owned = std::make_shared<const std::string>(data, static_cast<size_t>(*bytes));
      tensor.data = *owned;
      tensor.owner = std::move(owned);
    } else {
      tensor.data = absl::string_view(data, static_cast<size_t>(*bytes));
      tensor.owner = region;
    }
    reply.shared[output.name()] = std::move(tensor);
  }
  for (const Output& output : outputs) {
    if (!reply.shared.contains(output.name) && !reply.raw.contains(output.name)) {
      return absl::DataLossError(absl::StrCat(
          "outputs[", output.name, "]: asked for, missing from the reply"));
    }
  }
  return reply;
}

absl::StatusOr<SharedRopeResult> SharedMemorySession::ApplyRope(
    absl::string_view profile, const TensorRef& query, const TensorRef& key,
    const TensorRef& positions, v1::ApplyRopeRequest::TensorLayout layout,
    ResultCopy copy) {
  if (profile.empty()) {
    return absl::InvalidArgumentError("profile: the model to run, a rope profile's name");
  }
  std::vector<Input> inputs;
  const auto add = [&inputs](absl::string_view name, const TensorRef& tensor) {
    inputs.push_back({std::string(name), std::string(InferenceDatatype(tensor.dtype)),
                      std::vector<int64_t>(tensor.shape.begin(), tensor.shape.end()),
                      tensor.data, nullptr});
  };
  if (absl::Status checked = CheckTensor(query, "query"); !checked.ok()) return checked;
  add("query", query);
  if (key.present()) {
    if (absl::Status checked = CheckTensor(key, "key"); !checked.ok()) return checked;
    add("key", key);
  }
  if (absl::Status checked = CheckTensor(positions, "positions"); !checked.ok()) {
    return checked;
  }
  add("positions", positions);
  // The rotated tensors have their inputs' dtype and shape.
  std::vector<Output> outputs = {{"query", static_cast<int64_t>(query.data.size())}};
  if (key.present()) outputs.push_back({"key", static_cast<int64_t>(key.data.size())});
  google::protobuf::Map<std::string, inference::InferParameter> parameters;
  if (layout != v1::ApplyRopeRequest::TENSOR_LAYOUT_UNSPECIFIED) {
    parameters["tensor_layout"].set_string_param(
        v1::ApplyRopeRequest::TensorLayout_Name(layout));
  }

  absl::MutexLock lock(&mu_);
  absl::StatusOr<Reply> reply =
      Infer(profile, inputs, outputs, parameters,
            copy == ResultCopy::kSessionDefault ? options_.copy : copy == ResultCopy::kCopy);
  if (!reply.ok()) return reply.status();
  SharedRopeResult result;
  result.query = std::move(reply->shared["query"]);
  if (key.present()) result.key = std::move(reply->shared["key"]);
  const auto factor = reply->response.parameters().find("attention_factor");
  if (factor != reply->response.parameters().end()) {
    result.attention_factor = factor->second.double_param();
  }
  return result;
}

absl::StatusOr<int64_t> SharedMemorySession::PanelWidth(
    absl::string_view profile, const std::vector<Input>& inputs,
    const google::protobuf::Map<std::string, inference::InferParameter>& parameters) {
  // F depends on the profile, the inputs' dtypes and trailing dimensions
  // (channels, content width) and the parameters, never on the rows.
  std::string key = absl::StrCat(profile.size(), ":", profile);
  for (const Input& input : inputs) {
    absl::StrAppend(&key, "|", input.name, ":", input.datatype);
    for (size_t d = 1; d < input.shape.size(); ++d) absl::StrAppend(&key, ",", input.shape[d]);
  }
  std::map<std::string, std::string> sorted;
  for (const auto& [name, value] : parameters) sorted[name] = value.SerializeAsString();
  for (const auto& [name, value] : sorted) absl::StrAppend(&key, "|", name, "=", value);
  if (const auto found = widths_.find(key); found != widths_.end()) return found->second;

  // One empty series: features [0, F] come back in the reply.
  static const std::string* const kEmptyOffsets = new std::string(16, '\0');
  std::vector<Input> probe;
  for (const Input& input : inputs) {
    if (input.name == "series_offsets") {
      probe.push_back({input.name, input.datatype, {2}, *kEmptyOffsets, nullptr});
    } else if (input.name == "channel_names") {
      probe.push_back(input);
    } else {
      Input empty = input;
      if (!empty.shape.empty()) empty.shape[0] = 0;
      empty.bytes = absl::string_view();
      probe.push_back(std::move(empty));
    }
  }
  absl::StatusOr<Reply> reply = Infer(profile, probe, {{"features", -1}}, parameters,
                                      /*copy=*/true);
  if (!reply.ok()) return reply.status();
  const auto& outputs = reply->response.outputs();
  const auto features = std::find_if(outputs.begin(), outputs.end(),
                                     [](const auto& o) { return o.name() == "features"; });
  const int64_t width =
      features != outputs.end() && features->shape_size() == 2 ? features->shape(1) : 0;
  widths_[key] = width;
  return width;
}

absl::StatusOr<SharedPanelResult> SharedMemorySession::EncodePanel(
    absl::string_view profile, const PanelInputs& panel, const PanelCallOptions& options) {
  if (profile.empty()) {
    return absl::InvalidArgumentError("profile: the model to run, a temporal profile's name");
  }
  if (!panel.series_offsets.present()) {
    return absl::InvalidArgumentError(
        "series_offsets: required, [S + 1] int64 row offsets of the series");
  }
  const v1::DType output_dtype =
      options.output_dtype == v1::DTYPE_UNSPECIFIED ? v1::FLOAT32 : options.output_dtype;
  if (output_dtype != v1::FLOAT32 && output_dtype != v1::FLOAT16 &&
      output_dtype != v1::BFLOAT16 && output_dtype != v1::FLOAT64) {
    return absl::InvalidArgumentError(absl::StrCat(
        "output_dtype: must be float32, float16, bfloat16 or float64, got ",
        DTypeString(output_dtype)));
  }

  // The row tensors, then offsets and names: the probe keeps these.
  std::vector<Input> inputs;
  const struct {
    absl::string_view name;
    const TensorRef* tensor;
  } row_tensors[] = {
      {"timestamps", &panel.timestamps},   {"values", &panel.values},
      {"mask", &panel.mask},               {"event_times", &panel.event_times},
      {"event_channels", &panel.event_channels}, {"event_values", &panel.event_values},
      {"content", &panel.content},
  };
  int64_t rows = -1;
  for (const auto& [name, tensor] : row_tensors) {
    if (!tensor->present()) continue;
    if (absl::Status checked = CheckTensor(*tensor, name); !checked.ok()) return checked;
    if (tensor->shape.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ".shape: a row tensor needs at least one axis"));
    }
    // Wide panels have a row per timestamp, long ones a row per event.
    if (rows < 0 && (name == "timestamps" || name == "event_times")) rows = tensor->shape[0];
    inputs.push_back({std::string(name), std::string(InferenceDatatype(tensor->dtype)),
                      std::vector<int64_t>(tensor->shape.begin(), tensor->shape.end()),
                      tensor->data, nullptr});
  }
  if (rows < 0) {
    return absl::InvalidArgumentError(
        "timestamps: a panel needs timestamps (wide) or event_times (long)");
  }
  if (absl::Status checked = CheckTensor(panel.series_offsets, "series_offsets");
      !checked.ok()) {
    return checked;
  }
  inputs.push_back({"series_offsets", std::string(InferenceDatatype(panel.series_offsets.dtype)),
                    std::vector<int64_t>(panel.series_offsets.shape.begin(),
                                         panel.series_offsets.shape.end()),
                    panel.series_offsets.data, nullptr});
  const auto add_bytes = [&inputs](absl::string_view name, std::string bytes, int64_t count) {
    auto owned = std::make_shared<const std::string>(std::move(bytes));
    inputs.push_back({std::string(name), "BYTES", {count}, *owned, owned});
  };
  if (!panel.channel_names.empty()) {
    add_bytes("channel_names", EncodeBytesElements(panel.channel_names),
              static_cast<int64_t>(panel.channel_names.size()));
  }
  const size_t probe_inputs = inputs.size();
  if (!panel.time_zones.empty()) {
    add_bytes("time_zones", EncodeBytesElements(panel.time_zones),
              static_cast<int64_t>(panel.time_zones.size()));
  }
  if (panel.time_zone_index.present()) {
    if (absl::Status checked = CheckTensor(panel.time_zone_index, "time_zone_index");
        !checked.ok()) {
      return checked;
    }
    inputs.push_back({"time_zone_index", std::string(InferenceDatatype(panel.time_zone_index.dtype)),
                      std::vector<int64_t>(panel.time_zone_index.shape.begin(),
                                           panel.time_zone_index.shape.end()),
                      panel.time_zone_index.data, nullptr});
  }
  if (!panel.states.empty()) {
    std::vector<std::string> serialized;
    serialized.reserve(panel.states.size());
    for (const v1::SeriesState& state : panel.states) {
      serialized.push_back(state.SerializeAsString());
    }
    add_bytes("states", EncodeBytesElements(serialized), static_cast<int64_t>(serialized.size()));
  }

  google::protobuf::Map<std::string, inference::InferParameter> parameters;
  if (output_dtype != v1::FLOAT32) {
    parameters["output_dtype"].set_string_param(std::string(InferenceDatatype(output_dtype)));
  }
  if (panel.num_channels != 0) parameters["num_channels"].set_int64_param(panel.num_channels);

  // The long layout's C, when not given, comes from the data (the server's
  // rule, v1::Observations.num_channels: channel_names' size, else the
  // states' channel count, else 1 + the largest event channel), which a
  // zero-row probe cannot see: the probe is told C. The call itself is sent
  // as the caller gave it; should the server derive another C, its reply
  // would not fit the features' bytes and the call fails, never silently.
  google::protobuf::Map<std::string, inference::InferParameter> probe_parameters = parameters;
  if (panel.num_channels == 0 && panel.event_channels.present() &&
      !panel.timestamps.present()) {
    int64_t channels = 0;
    if (!panel.channel_names.empty()) {
      channels = static_cast<int64_t>(panel.channel_names.size());
    } else if (!panel.states.empty() && panel.states[0].channels_size() > 0) {
      channels = panel.states[0].channels_size();
    } else if (panel.event_channels.dtype == v1::INT32) {
      const size_t count = panel.event_channels.data.size() / sizeof(int32_t);
      for (size_t i = 0; i < count; ++i) {
        int32_t channel;
        std::memcpy(&channel, panel.event_channels.data.data() + i * sizeof(int32_t),
                    sizeof(channel));
        channels = std::max<int64_t>(channels, int64_t{channel} + 1);
      }
    }
    if (channels > 0) probe_parameters["num_channels"].set_int64_param(channels);
  }

  absl::MutexLock lock(&mu_);
  absl::StatusOr<int64_t> width =
      PanelWidth(profile,
                 std::vector<Input>(inputs.begin(),
                                    inputs.begin() + static_cast<std::ptrdiff_t>(probe_inputs)),
                 probe_parameters);
  if (!width.ok()) return width.status();
  const std::vector<int64_t> features_shape = {rows, *width};
  absl::StatusOr<int64_t> features_bytes = TensorBytes(output_dtype, features_shape, "features");
  if (!features_bytes.ok()) return features_bytes.status();
  std::vector<Output> outputs = {{"features", *features_bytes}};
  if (options.return_states) outputs.push_back({"states", -1});
  const bool copy = options.copy == ResultCopy::kSessionDefault ? options_.copy
                                                                : options.copy == ResultCopy::kCopy;
  absl::StatusOr<Reply> reply = Infer(profile, inputs, outputs, parameters, copy);
  if (!reply.ok()) return reply.status();

  SharedPanelResult result;
  result.features = std::move(reply->shared["features"]);
  for (const auto& output : reply->response.outputs()) {
    if (output.name() != "features") continue;
    const auto schema = output.parameters().find("schema");
    if (schema == output.parameters().end() || schema->second.string_param().empty()) break;
    // The schema travels as a JSON array of {block, offset, width,
    // meaning}: SchemaEntry's fields, so protobuf's JSON parser reads it.
    v1::EncodeObservationsResponse holder;
    google::protobuf::util::JsonParseOptions json;
    json.ignore_unknown_fields = true;
    const auto parsed = google::protobuf::util::JsonStringToMessage(
        absl::StrCat("{\"schema\":", schema->second.string_param(), "}"), &holder, json);
    if (!parsed.ok()) {
      return absl::DataLossError(absl::StrCat(
          "outputs[features].parameters[schema]: not a JSON array of schema entries: ",
          parsed.ToString()));
    }
    result.schema.assign(holder.schema().begin(), holder.schema().end());
  }
  if (options.return_states) {
    const std::string& raw = reply->response.raw_output_contents(reply->raw["states"]);
    absl::StatusOr<std::vector<absl::string_view>> items =
        DecodeBytesElements(raw, "outputs[states]");
    if (!items.ok()) return items.status();
    result.states.resize(items->size());
    for (size_t s = 0; s < items->size(); ++s) {
      if (!result.states[s].ParseFromArray((*items)[s].data(),
                                           static_cast<int>((*items)[s].size()))) {
        return absl::DataLossError(
            absl::StrCat("outputs[states][", s, "]: not a phasor.v1.SeriesState"));
      }
    }
  }
  return result;
}

}  // namespace phasor
