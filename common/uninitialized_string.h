// Sizing a std::string without writing its new bytes, for tensors that are
// overwritten in full (the server's response tensors, which a kernel fills;
// the C++ client's joined panel features, which the sub-calls fill):
// std::string::resize writes a zero into every byte first, a pass over the
// whole tensor (16 MiB per 16 MiB response) that buys nothing.
//
// C++23's std::string::resize_and_overwrite is the standard way to do it
// (libstdc++ 12 has it, in C++23 mode only); this file's .cc is the one
// translation unit compiled as C++23, and only <string> crosses it.
//
// In builds with assertions on (Debug, and the sanitizer builds, which keep
// asserts) the new bytes are filled with 0xA5 instead, so a kernel that
// leaves part of its output unwritten shows up as wrong values in the tests
// rather than as zeros that happen to be right.
//
// Thread-safety: as std::string.
#ifndef PHASOR_COMMON_UNINITIALIZED_STRING_H_
#define PHASOR_COMMON_UNINITIALIZED_STRING_H_

#include <cstddef>
#include <string>

namespace phasor {

// Resizes `s` to `size` bytes; bytes past the old size are unspecified
// (see the file comment). Bytes before it are kept.
void ResizeUninitialized(std::string* s, size_t size);

}  // namespace phasor

#endif  // PHASOR_COMMON_UNINITIALIZED_STRING_H_
