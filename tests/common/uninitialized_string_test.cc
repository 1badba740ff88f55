// ResizeUninitialized (common/uninitialized_string.h): the size asked for,
// whatever capacity the string grows to, and the old bytes kept.
#include "common/uninitialized_string.h"

#include <string>

#include <gtest/gtest.h>

namespace phasor {
namespace {

TEST(ResizeUninitialized, GivesExactlyTheSizeAskedFor) {
  // 16 and 24 bytes from empty: libstdc++ 12 reallocates to 30 there.
  for (size_t size : {0, 1, 15, 16, 24, 31, 100, 4096, 1 << 20}) {
    std::string s;
    ResizeUninitialized(&s, size);
    EXPECT_EQ(s.size(), size);
    EXPECT_EQ(s.data()[size], '\0');  // Still a valid C string.
  }
}

TEST(ResizeUninitialized, KeepsTheBytesBeforeTheOldSizeAndShrinks) {
  std::string s = "abc";
  ResizeUninitialized(&s, 40);
  ASSERT_EQ(s.size(), 40u);
  EXPECT_EQ(s.substr(0, 3), "abc");
  ResizeUninitialized(&s, 2);
  EXPECT_EQ(s, "ab");
}

}  // namespace
}  // namespace phasor
