#include "tests/fuzz/fuzz_util.h"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "google/protobuf/text_format.h"
#include "core/adapters/dtype.h"
#include "phasor/v1/encoder.pb.h"
#include "server/convert.h"

namespace phasor::fuzz {

namespace {

// Files in tests/data (PHASOR_TEST_DATA_DIR): table_5x4_f32.npy is [5, 4];
// table.safetensors holds "wpe" [5, 4] and "other" [2] (F64).
constexpr char kProfiles[] = R"pb(
  profile {
    name: "wpe"
    spec { positional { learned { table: "wpe" } } }
    learned_tables { name: "wpe" file { path: "table_5x4_f32.npy" } }
  }
  profile {
    name: "rope"
    spec { rope { rotary_dim: 4 base: 10000 } }
  }
  profile {
    name: "shaw"
    spec { relative_bias { shaw { max_relative_position: 2 } table: "wpe" } }
  }
  profile {
    name: "vitals"
    spec {
      temporal {
        time { dim: 4 min_period_seconds: 60 max_period_seconds: 86400 }
        gaps {}
        calendar { time_zone: "Europe/Paris" fields: HOUR_OF_DAY fields: DAY_OF_WEEK }
      }
    }
    holiday_calendars { name: "demo" dates: "2024-12-25" dates: "2025-01-01" }
    time2vec {
      name: "t2v"
      omega { path: "table.safetensors" tensor: "other" }
      phi { path: "table.safetensors" tensor: "other" }
    }
  }
)pb";

std::unique_ptr<server::ProfileRegistry> LoadProfiles() {
  v1::ProfileSet set;
  if (!google::protobuf::TextFormat::ParseFromString(kProfiles, &set)) {
    std::fprintf(stderr, "fuzz_util: the built-in profiles do not parse\n");
    std::abort();
  }
  auto registry = server::ProfileRegistry::FromProto(set, PHASOR_TEST_DATA_DIR);
  if (!registry.ok()) {
    std::fprintf(stderr, "fuzz_util: %s\n", registry.status().ToString().c_str());
    std::abort();
  }
  return std::move(*registry);
}

// Bytes per element of a phasor.v1.DType; 0 when unknown.
int64_t ElementBytes(v1::DType dtype) {
  const absl::StatusOr<DType> known = server::DTypeFromProto(dtype, "dtype");
  return known.ok() ? static_cast<int64_t>(DTypeSize(*known)) : 0;
}

[[noreturn]] void Fail(const google::protobuf::Message& message, const char* what) {
  std::fprintf(stderr, "fuzz: handler answered OK with a bad %s: %s\n",
               message.GetTypeName().c_str(), what);
  std::abort();
}

void CheckTensor(const v1::Tensor& tensor) {
  if (tensor.shape_size() == 0 && tensor.data().empty() &&
      tensor.dtype() == v1::DTYPE_UNSPECIFIED) {
    return;  // Not set.
  }
  const int64_t element_bytes = ElementBytes(tensor.dtype());
  if (element_bytes == 0) Fail(tensor, "dtype");
  // Outputs are bounded by the limits, so the product cannot overflow
  // unless a dimension is absurd, which is itself the finding.
  uint64_t elements = 1;
  for (const int64_t dim : tensor.shape()) {
    if (dim < 0 || dim > (int64_t{1} << 32)) Fail(tensor, "dimension");
    elements *= static_cast<uint64_t>(dim);
    if (elements > (uint64_t{1} << 40)) Fail(tensor, "shape");
  }
  if (tensor.data().size() != elements * static_cast<uint64_t>(element_bytes)) {
    Fail(tensor, "byte count for its shape");
  }
}

}  // namespace

void CheckTensors(const google::protobuf::Message& message) {
  if (const auto* tensor = dynamic_cast<const v1::Tensor*>(&message)) {
    CheckTensor(*tensor);
    return;
  }
  const google::protobuf::Reflection* reflection = message.GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);
  for (const google::protobuf::FieldDescriptor* field : fields) {
    if (field->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) {
      continue;
    }
    if (field->is_repeated()) {
      for (int i = 0; i < reflection->FieldSize(message, field); ++i) {
        CheckTensors(reflection->GetRepeatedMessage(message, field, i));
      }
    } else {
      CheckTensors(reflection->GetMessage(message, field));
    }
  }
}

server::ServerCaches& Caches() {
  static server::ServerCaches* const caches = new server::ServerCaches();
  return *caches;
}

const server::ProfileRegistry& Profiles() {
  // Leaked on purpose: it lives as long as the fuzzing process.
  static const server::ProfileRegistry* const registry = LoadProfiles().release();
  return *registry;
}

}  // namespace phasor::fuzz
