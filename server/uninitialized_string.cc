// Compiled as C++23 (server/CMakeLists.txt) for resize_and_overwrite.
#include "server/uninitialized_string.h"

#include <cstring>

namespace phasor::server {

void ResizeUninitialized(std::string* s, size_t size) {
  const size_t old_size = s->size();
  s->resize_and_overwrite(size, [old_size](char* data, size_t n) {
#ifndef NDEBUG
    if (n > old_size) std::memset(data + old_size, 0xA5, n - old_size);
#else
    static_cast<void>(data);
    static_cast<void>(old_size);
#endif
    return n;
  });
}

}  // namespace phasor::server
