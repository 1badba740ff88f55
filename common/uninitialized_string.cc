// Compiled as C++23 (common/CMakeLists.txt) for resize_and_overwrite.
#include "common/uninitialized_string.h"

#include <cstring>

namespace phasor {

void ResizeUninitialized(std::string* s, size_t size) {
  const size_t old_size = s->size();
  // The operation returns `size`, not the length it is handed: libstdc++ 12
  // hands it the grown capacity when the string reallocates (24 requested
  // bytes on an empty string became 30).
  s->resize_and_overwrite(size, [old_size, size](char* data, size_t) {
#ifndef NDEBUG
    if (size > old_size) std::memset(data + old_size, 0xA5, size - old_size);
#else
    static_cast<void>(data);
    static_cast<void>(old_size);
#endif
    return size;
  });
}

}  // namespace phasor
