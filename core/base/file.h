// -----------------------------------------------------------------------------
// File: core/base/file.h
// -----------------------------------------------------------------------------
//
// Whole-file reads for the small inputs Phasor loads: array files, profile
// files, certificates and tokens.
//
// Thread-safety: pure function.
//
// Example:
//
//   absl::StatusOr<std::string> bytes = ReadFileToString(path, "--profiles");
#ifndef PHASOR_CORE_BASE_FILE_H_
#define PHASOR_CORE_BASE_FILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace phasor {

// The bytes of the file at `path`. A file that cannot be opened is NOT_FOUND
// with the message "<label>: cannot open <path>" (label: the flag or field
// that named the file), or "<path>: cannot open" when `label` is empty.
absl::StatusOr<std::string> ReadFileToString(const std::string& path,
                                             absl::string_view label = "");

}  // namespace phasor

#endif  // PHASOR_CORE_BASE_FILE_H_
