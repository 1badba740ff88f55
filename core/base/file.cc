#include "core/base/file.h"

#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace phasor {

absl::StatusOr<std::string> ReadFileToString(const std::string& path,
                                             absl::string_view label) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(label.empty()
                                   ? absl::StrCat(path, ": cannot open")
                                   : absl::StrCat(label, ": cannot open ", path));
  }
  std::ostringstream contents;
  contents << in.rdbuf();
  return std::move(contents).str();
}

}  // namespace phasor
