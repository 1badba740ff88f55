#include "server/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace phasor::server {

// One mapped region. Immutable once built; unmapped and closed when the
// last holder (the registry's table, or a call's SharedMemoryBlock) drops
// it.
class SharedMemoryRegion final {
 public:
  SharedMemoryRegion(SharedMemoryRegionInfo info, int fd, void* mapping, size_t mapping_bytes,
                     char* base)
      : info_(std::move(info)),
        fd_(fd),
        mapping_(mapping),
        mapping_bytes_(mapping_bytes),
        base_(base) {}
  SharedMemoryRegion(const SharedMemoryRegion&) = delete;
  SharedMemoryRegion& operator=(const SharedMemoryRegion&) = delete;
  ~SharedMemoryRegion() {
    munmap(mapping_, mapping_bytes_);
    close(fd_);
  }

  const SharedMemoryRegionInfo& info() const { return info_; }
  char* base() const { return base_; }

  // OK while the object still exists and holds `end` bytes (offset in the
  // object); FAILED_PRECONDITION at `field` naming the region otherwise.
  absl::Status CheckObjectCovers(uint64_t end, absl::string_view field) const {
    struct stat status;
    if (fstat(fd_, &status) != 0) {
      return FieldError(absl::StatusCode::kFailedPrecondition, field,
                        absl::StrCat("cannot stat the object of shared-memory region ", Quoted(),
                                     ": ", std::strerror(errno)));
    }
    if (status.st_nlink == 0) {
      return FieldError(absl::StatusCode::kFailedPrecondition, field,
                        absl::StrCat("the object of shared-memory region ", Quoted(),
                                     " was removed (shm_unlink) since it was "
                                     "registered; register it again"));
    }
    if (static_cast<uint64_t>(status.st_size) < end) {
      return FieldError(absl::StatusCode::kFailedPrecondition, field,
                        absl::StrCat("the object of shared-memory region ", Quoted(), " is ",
                                     status.st_size, " bytes now, the call needs ", end,
                                     " (was it truncated since it was registered?)"));
    }
    return absl::OkStatus();
  }

  std::string Quoted() const { return QuoteForError(info_.name, /*max_bytes=*/64, "'"); }

 private:
  const SharedMemoryRegionInfo info_;
  const int fd_;
  void* const mapping_;
  const size_t mapping_bytes_;
  char* const base_;
};

namespace {

// Longest name and key taken: names show up in errors and Status replies,
// keys are file names (NAME_MAX is 255).
constexpr size_t kMaxNameBytes = 128;
constexpr size_t kMaxKeyBytes = 255;

absl::Status Invalid(absl::string_view field, absl::string_view message) {
  return InvalidField(field, message);
}

std::string ParameterField(absl::string_view prefix, absl::string_view parameter) {
  return absl::StrCat(prefix, "parameters[", parameter, "]");
}

// Register of a name in use: ALREADY_EXISTS at "name".
absl::Status NameTaken(absl::string_view name) {
  return FieldError(absl::StatusCode::kAlreadyExists, "name",
                    absl::StrCat("region ", QuoteForError(name, 64, "'"),
                                 " is already registered; unregister it first"));
}

// Unregister or Status of an unknown name: NOT_FOUND at "name".
absl::Status NotRegistered(absl::string_view name) {
  return FieldError(
      absl::StatusCode::kNotFound, "name",
      absl::StrCat("no shared-memory region ", QuoteForError(name, 64, "'"), " is registered"));
}

}  // namespace

const std::string& SharedMemoryBlock::region_name() const { return region_->info().name; }

absl::Status SharedMemoryBlock::Recheck(absl::string_view field) const {
  return region_->CheckObjectCovers(end_in_object_, field);
}

SharedMemoryRegistry::SharedMemoryRegistry(SharedMemoryOptions options)
    : options_(std::move(options)) {}

SharedMemoryRegistry::~SharedMemoryRegistry() = default;

absl::Status SharedMemoryRegistry::CheckEnabled() const {
  return options_.enabled ? absl::OkStatus() : DisabledError();
}

absl::Status SharedMemoryRegistry::DisabledError() {
  return absl::UnimplementedError(
      "system shared memory is disabled on this server (start phasor-server with "
      "--system_shared_memory=true, or PHASOR_SYSTEM_SHARED_MEMORY=true, to enable it)");
}

absl::Status SharedMemoryRegistry::Register(absl::string_view name, absl::string_view key,
                                            uint64_t offset, uint64_t byte_size) {
  PHASOR_RETURN_IF_ERROR(CheckEnabled());
  if (name.empty()) return Invalid("name", "must name the region");
  if (name.size() > kMaxNameBytes) {
    return Invalid(
        "name", absl::StrCat("is ", name.size(), " bytes; at most ", kMaxNameBytes, " are taken"));
  }
  const std::string quoted_key = QuoteForError(key, /*max_bytes=*/64, "'");
  if (key.empty()) return Invalid("key", "must name a shared-memory object (\"/phasor_x\")");
  if (key.size() > kMaxKeyBytes || key[0] != '/' || key.find('/', 1) != absl::string_view::npos ||
      key.find('\0') != absl::string_view::npos || key == "/") {
    return Invalid("key", absl::StrCat(quoted_key,
                                       " is not a POSIX shared-memory name: one '/' then "
                                       "up to 254 bytes without '/'"));
  }
  if (!absl::StartsWith(key, options_.key_prefix)) {
    return FieldError(
        absl::StatusCode::kPermissionDenied, "key",
        absl::StrCat(quoted_key, " does not start with the prefix '", options_.key_prefix,
                     "' this server maps (--shared_memory_key_prefix)"));
  }
  if (byte_size == 0) return Invalid("byte_size", "must be > 0");
  if (offset > static_cast<uint64_t>(INT64_MAX) ||
      byte_size > static_cast<uint64_t>(INT64_MAX) - offset) {
    return Invalid("byte_size", "offset + byte_size overflows");
  }
  if (byte_size > static_cast<uint64_t>(options_.max_bytes)) {
    return FieldError(
        absl::StatusCode::kResourceExhausted, "byte_size",
        absl::StrCat(byte_size, " bytes is over the server's limit of ", options_.max_bytes,
                     " registered bytes (--shared_memory_max_bytes)"));
  }
  {
    absl::MutexLock lock(&mu_);
    if (regions_.contains(name)) {
      return NameTaken(name);
    }
  }

  const std::string key_string(key);
  const int fd = shm_open(key_string.c_str(), O_RDWR, 0);
  if (fd < 0) {
    const int error = errno;
    const absl::StatusCode code = error == ENOENT   ? absl::StatusCode::kNotFound
                                  : error == EACCES ? absl::StatusCode::kPermissionDenied
                                                    : absl::StatusCode::kInvalidArgument;
    return FieldError(
        code, "key",
        absl::StrCat("cannot open shared-memory object ", quoted_key, ": ", std::strerror(error)));
  }
  struct stat status;
  if (fstat(fd, &status) != 0 || !S_ISREG(status.st_mode)) {
    close(fd);
    return Invalid("key", absl::StrCat(quoted_key, " is not a shared-memory object"));
  }
  if (static_cast<uint64_t>(status.st_size) < offset + byte_size) {
    close(fd);
    return Invalid("byte_size",
                   absl::StrCat("object ", quoted_key, " is ", status.st_size, " bytes; offset ",
                                offset, " + byte_size ", byte_size, " reaches past its end"));
  }
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t map_offset = offset / page * page;
  const size_t mapping_bytes = static_cast<size_t>(offset - map_offset + byte_size);
  void* mapping = mmap(nullptr, mapping_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                       static_cast<off_t>(map_offset));
  if (mapping == MAP_FAILED) {
    const int error = errno;
    close(fd);
    return FieldError(error == EACCES ? absl::StatusCode::kPermissionDenied
                                      : absl::StatusCode::kResourceExhausted,
                      "key",
                      absl::StrCat("cannot map ", byte_size, " bytes of ", quoted_key, ": ",
                                   std::strerror(error)));
  }
  auto region = std::make_shared<const SharedMemoryRegion>(
      SharedMemoryRegionInfo{std::string(name), key_string, offset, byte_size}, fd, mapping,
      mapping_bytes, static_cast<char*>(mapping) + (offset - map_offset));

  absl::MutexLock lock(&mu_);
  // Checked again under the lock that inserts: another Register may have
  // taken the name or the room meanwhile (the region then unmaps here).
  if (regions_.contains(name)) {
    return NameTaken(name);
  }
  if (static_cast<int>(regions_.size()) >= options_.max_regions) {
    return FieldError(absl::StatusCode::kResourceExhausted, "name",
                      absl::StrCat("the server holds ", regions_.size(),
                                   " regions, its limit (--shared_memory_max_regions); "
                                   "unregister one first"));
  }
  if (static_cast<int64_t>(byte_size) > options_.max_bytes - registered_bytes_) {
    return FieldError(absl::StatusCode::kResourceExhausted, "byte_size",
                      absl::StrCat(registered_bytes_, " bytes are registered; ", byte_size,
                                   " more would pass the server's limit of ", options_.max_bytes,
                                   " (--shared_memory_max_bytes)"));
  }
  registered_bytes_ += static_cast<int64_t>(byte_size);
  regions_.emplace(std::string(name), std::move(region));
  return absl::OkStatus();
}

absl::Status SharedMemoryRegistry::Unregister(absl::string_view name) {
  PHASOR_RETURN_IF_ERROR(CheckEnabled());
  // Dropped outside the lock: the last reference unmaps.
  std::vector<std::shared_ptr<const SharedMemoryRegion>> dropped;
  absl::MutexLock lock(&mu_);
  if (name.empty()) {
    for (auto& [unused, region] : regions_) dropped.push_back(std::move(region));
    regions_.clear();
    registered_bytes_ = 0;
  } else {
    const auto found = regions_.find(name);
    if (found == regions_.end()) {
      return NotRegistered(name);
    }
    registered_bytes_ -= static_cast<int64_t>(found->second->info().byte_size);
    dropped.push_back(std::move(found->second));
    regions_.erase(found);
  }
  return absl::OkStatus();  // `lock` ends before `dropped` unmaps.
}

absl::StatusOr<std::vector<SharedMemoryRegionInfo>> SharedMemoryRegistry::Status(
    absl::string_view name) const {
  PHASOR_RETURN_IF_ERROR(CheckEnabled());
  std::vector<SharedMemoryRegionInfo> infos;
  absl::MutexLock lock(&mu_);
  if (name.empty()) {
    for (const auto& [unused, region] : regions_) infos.push_back(region->info());
    return infos;
  }
  const auto found = regions_.find(name);
  if (found == regions_.end()) {
    return NotRegistered(name);
  }
  infos.push_back(found->second->info());
  return infos;
}

absl::StatusOr<SharedMemoryBlock> SharedMemoryRegistry::Acquire(absl::string_view name,
                                                                int64_t offset, int64_t byte_size,
                                                                absl::string_view field) const {
  PHASOR_RETURN_IF_ERROR(CheckEnabled());
  const std::string region_field = ParameterField(field, "shared_memory_region");
  std::shared_ptr<const SharedMemoryRegion> region;
  {
    absl::MutexLock lock(&mu_);
    const auto found = regions_.find(name);
    if (found != regions_.end()) region = found->second;
  }
  if (region == nullptr) {
    return Invalid(region_field,
                   absl::StrCat("no shared-memory region ", QuoteForError(name, 64, "'"),
                                " is registered (SystemSharedMemoryRegister registers it)"));
  }
  const uint64_t region_bytes = region->info().byte_size;
  if (offset < 0 || static_cast<uint64_t>(offset) > region_bytes) {
    return Invalid(ParameterField(field, "shared_memory_offset"),
                   absl::StrCat(offset, " is outside region ", region->Quoted(), " of ",
                                region_bytes, " bytes"));
  }
  if (byte_size < 0) {
    return Invalid(ParameterField(field, "shared_memory_byte_size"),
                   absl::StrCat("must be >= 0, got ", byte_size));
  }
  if (static_cast<uint64_t>(byte_size) > region_bytes - static_cast<uint64_t>(offset)) {
    return Invalid(
        ParameterField(field, "shared_memory_byte_size"),
        absl::StrCat(byte_size, " bytes from offset ", offset, " reach past the end of region ",
                     region->Quoted(), " (", region_bytes, " bytes)"));
  }
  const uint64_t end =
      region->info().offset + static_cast<uint64_t>(offset) + static_cast<uint64_t>(byte_size);
  PHASOR_RETURN_IF_ERROR(region->CheckObjectCovers(end, region_field));
  SharedMemoryBlock block;
  block.bytes_ = absl::MakeSpan(region->base() + offset, static_cast<size_t>(byte_size));
  block.end_in_object_ = end;
  block.region_ = std::move(region);
  return block;
}

int SharedMemoryRegistry::region_count() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(regions_.size());
}

int64_t SharedMemoryRegistry::registered_bytes() const {
  absl::MutexLock lock(&mu_);
  return registered_bytes_;
}

}  // namespace phasor::server
