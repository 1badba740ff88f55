// Test helpers for absl::Status: Debian 12's Abseil has no status matchers.
#ifndef PHASOR_TESTS_STATUS_MATCHERS_H_
#define PHASOR_TESTS_STATUS_MATCHERS_H_

#include <string>

#include "absl/status/status.h"
#include "core/base/errors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace phasor {

// Matches a Status with `code` whose field-path payload equals `field`.
MATCHER_P2(IsFieldError, code, field,
           std::string("is ") + absl::StatusCodeToString(code) + " at " + field) {
  const absl::Status& status = arg;
  const std::optional<std::string> path = FieldPathOf(status);
  *result_listener << "status " << status << ", field path "
                   << (path ? *path : std::string("<none>"));
  return status.code() == code && path.has_value() && *path == field &&
         status.message().find(field) == 0;
}

#define PHASOR_ASSERT_OK(expr)                       \
  do {                                               \
    const ::absl::Status phasor_s_ = (expr);         \
    ASSERT_TRUE(phasor_s_.ok()) << phasor_s_;        \
  } while (0)

}  // namespace phasor

#endif  // PHASOR_TESTS_STATUS_MATCHERS_H_
