// core/errors.h: field paths as segments, their wire form, the payloads a
// field error carries, and the operations that edit a path and render the
// message again.
#include "core/base/errors.h"

#include <cstdint>
#include <limits>
#include <random>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace phasor {
namespace {

using ::testing::ElementsAre;
using ::testing::Optional;

FieldPathSegment Named(const std::string& name) { return {name, std::nullopt}; }
FieldPathSegment Indexed(const std::string& name, int64_t index) { return {name, index}; }

TEST(ParseFieldPath, NamesAndIndices) {
  EXPECT_THAT(ParseFieldPath("observations.series[3].values[5]"),
              ElementsAre(Named("observations"), Indexed("series", 3),
                          Indexed("values", 5)));
  EXPECT_THAT(ParseFieldPath("states[2].channels[0].last_seen_ns"),
              ElementsAre(Indexed("states", 2), Indexed("channels", 0),
                          Named("last_seen_ns")));
  // A further index of the same field has an empty name.
  EXPECT_THAT(ParseFieldPath("a[1][2]"), ElementsAre(Indexed("a", 1), Indexed("", 2)));
  EXPECT_THAT(ParseFieldPath("spec"), ElementsAre(Named("spec")));
  EXPECT_THAT(ParseFieldPath("positions[0]"), ElementsAre(Indexed("positions", 0)));
}

TEST(ParseFieldPath, WhatIsNotTheWireFormIsKeptWhole) {
  // Never misread as an index: signs, leading zeros, letters, no name,
  // text after the bracket, an index past int64, a capped path's note.
  for (const std::string odd :
       {"a[-1]", "a[01]", "a[x]", "[3]", "a[1]b", "a[]", "a[9223372036854775808]",
        "series...(12 more bytes)", "inputs[timestamps]"}) {
    const FieldPath path = ParseFieldPath(odd);
    for (const FieldPathSegment& segment : path) {
      EXPECT_FALSE(segment.index.has_value()) << odd;
    }
    EXPECT_EQ(FormatFieldPath(path), odd);
  }
  EXPECT_THAT(ParseFieldPath("a[-1]"), ElementsAre(Named("a[-1]")));
  EXPECT_THAT(ParseFieldPath("a.[2]"), ElementsAre(Named("a"), Named("[2]")));
  EXPECT_THAT(ParseFieldPath("a[9223372036854775807]"),
              ElementsAre(Indexed("a", std::numeric_limits<int64_t>::max())));
}

// FormatFieldPath(ParseFieldPath(p)) == p for every string, as the Python
// client's parse_field_path/format_field_path guarantee for theirs.
TEST(ParseFieldPath, EveryStringRoundTrips) {
  std::mt19937 rng(3);
  const std::string alphabet = "ab_.[]019-";
  std::uniform_int_distribution<int> length(0, 12);
  std::uniform_int_distribution<size_t> pick(0, alphabet.size() - 1);
  for (int trial = 0; trial < 20000; ++trial) {
    std::string text;
    for (int n = length(rng); n > 0; --n) text.push_back(alphabet[pick(rng)]);
    ASSERT_EQ(FormatFieldPath(ParseFieldPath(text)), text);
  }
}

TEST(SerializeFieldPath, RoundTripsAndRejectsWhatItDidNotWrite) {
  const FieldPath path = {Named("observations"), Indexed("series", 3),
                          Indexed("", std::numeric_limits<int64_t>::min()), Named("")};
  const std::string bytes = SerializeFieldPath(path);
  EXPECT_THAT(DeserializeFieldPath(bytes), Optional(path));
  EXPECT_THAT(DeserializeFieldPath(""), Optional(FieldPath{}));
  // Every truncated prefix is refused (or, cut at a segment boundary, is the
  // path's prefix).
  for (size_t size = 1; size < bytes.size(); ++size) {
    const std::optional<FieldPath> cut = DeserializeFieldPath(bytes.substr(0, size));
    if (!cut) continue;
    ASSERT_LT(cut->size(), path.size()) << size;
    EXPECT_TRUE(std::equal(cut->begin(), cut->end(), path.begin())) << size;
  }
  std::string bad_flag = SerializeFieldPath({Named("a")});
  bad_flag.back() = 2;
  EXPECT_EQ(DeserializeFieldPath(bad_flag), std::nullopt);
}

TEST(FieldError, CarriesPathAndDescriptionAndRendersTheMessage) {
  const absl::Status status = InvalidField("spec.rope.rotary_dim", "must be even, got 7");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "spec.rope.rotary_dim: must be even, got 7");
  EXPECT_EQ(status.message(), RenderFieldMessage("spec.rope.rotary_dim", "must be even, got 7"));
  EXPECT_THAT(FieldPathOf(status), Optional(std::string("spec.rope.rotary_dim")));
  EXPECT_THAT(FieldPathSegmentsOf(status),
              Optional(ElementsAre(Named("spec"), Named("rope"), Named("rotary_dim"))));
  EXPECT_THAT(FieldDescriptionOf(status), Optional(std::string("must be even, got 7")));

  const absl::Status from_segments = FieldError(
      absl::StatusCode::kOutOfRange, {Named("positions"), Indexed("values", 2)}, "too far");
  EXPECT_EQ(from_segments.code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(from_segments.message(), "positions.values[2]: too far");

  const absl::Status plain = absl::InvalidArgumentError("no field");
  EXPECT_EQ(FieldPathOf(plain), std::nullopt);
  EXPECT_EQ(FieldPathSegmentsOf(plain), std::nullopt);
  EXPECT_EQ(FieldDescriptionOf(plain), std::nullopt);
}

TEST(WithFieldPath, ReaddressesAndKeepsCodeAndOtherPayloads) {
  absl::Status status = FieldError(absl::StatusCode::kResourceExhausted, "k_len", "too big");
  status.SetPayload("example.com/other", absl::Cord("kept"));
  const absl::Status moved = WithFieldPath(status, ParseFieldPath("key_positions"));
  EXPECT_EQ(moved.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(moved.message(), "key_positions: too big");
  EXPECT_THAT(FieldDescriptionOf(moved), Optional(std::string("too big")));
  EXPECT_THAT(moved.GetPayload("example.com/other"), Optional(absl::Cord("kept")));
  const absl::Status described =
      WithFieldPath(status, ParseFieldPath("profile"), "profile 'p' k_len: too big");
  EXPECT_EQ(described.message(), "profile: profile 'p' k_len: too big");
  // Nothing to re-address.
  const absl::Status plain = absl::InternalError("x");
  EXPECT_EQ(WithFieldPath(plain, ParseFieldPath("a")), plain);
  EXPECT_EQ(WithFieldPath(absl::OkStatus(), ParseFieldPath("a")), absl::OkStatus());
}

TEST(PrefixFieldPath, PutsSegmentsInFront) {
  const absl::Status status = InvalidField("rope.scaling.yarn.factor", "must be > 0");
  const absl::Status prefixed = PrefixFieldPath(status, "spec");
  EXPECT_EQ(prefixed.message(), "spec.rope.scaling.yarn.factor: must be > 0");
  EXPECT_THAT(FieldPathOf(PrefixFieldPath(InvalidField("[", "odd"), "a[1]")),
              Optional(std::string("a[1].[")));
  FieldPath path = ParseFieldPath("values[2]");
  EXPECT_TRUE(PrefixFieldPath(&path, ParseFieldPath("observations.series[1]")));
  EXPECT_EQ(FormatFieldPath(path), "observations.series[1].values[2]");
  EXPECT_FALSE(PrefixFieldPath(&path, {}));
}

TEST(RenameFieldPath, RootsFieldsAndLevels) {
  // A root renamed, its index kept.
  EXPECT_EQ(RenameFieldPath(InvalidField("positions[3]", "d"), "positions", "position_ids")
                .message(),
            "position_ids[3]: d");
  // A level added: the index moves to the last segment of `to`.
  EXPECT_EQ(RenameFieldPath(InvalidField("positions[3]", "d"), "positions",
                            "positions.values")
                .message(),
            "positions.values[3]: d");
  // A field moved, the rest of the path kept.
  EXPECT_EQ(RenameFieldPath(
                InvalidField("spec.rope.scaling.yarn.max_position_embeddings", "d"),
                "spec.rope.scaling.yarn.max_position_embeddings",
                "spec.rope.max_position_embeddings")
                .message(),
            "spec.rope.max_position_embeddings: d");
  EXPECT_EQ(RenameFieldPath(InvalidField("states[2].channels[0]", "d"), "states", "s")
                .message(),
            "s[2].channels[0]: d");
  // No match: another name, a shorter path, a longer name, an index inside
  // the renamed prefix (it would be lost).
  for (const char* path : {"position[3]", "spec.rope", "positions_x[1]"}) {
    const absl::Status status = InvalidField(path, "d");
    EXPECT_EQ(RenameFieldPath(status, "positions", "p"), status) << path;
  }
  const absl::Status indexed = InvalidField("a[1].b", "d");
  EXPECT_EQ(RenameFieldPath(indexed, "a.b", "c"), indexed);
  const absl::Status plain = absl::InvalidArgumentError("positions[3]: not a field error");
  EXPECT_EQ(RenameFieldPath(plain, "positions", "p"), plain);
}

TEST(ShiftFieldIndex, RenumbersTheNamedSegment) {
  const absl::Status status =
      InvalidField("observations.series[2].values[7]", "inf in channel 1");
  EXPECT_EQ(ShiftFieldIndex(status, "observations.series", 10).message(),
            "observations.series[12].values[7]: inf in channel 1");
  // Indices on the leading segments are allowed: a row within the series.
  EXPECT_EQ(ShiftFieldIndex(status, "observations.series.values", 300).message(),
            "observations.series[2].values[307]: inf in channel 1");
  EXPECT_EQ(ShiftFieldIndex(InvalidField("states[0].last_timestamp_ns", "d"), "states", 5)
                .message(),
            "states[5].last_timestamp_ns: d");
  // Unchanged: no such segment, no index on it, a zero shift, an overflow.
  EXPECT_EQ(ShiftFieldIndex(status, "states", 1), status);
  const absl::Status unindexed = InvalidField("observations.series_offsets", "d");
  EXPECT_EQ(ShiftFieldIndex(unindexed, "observations.series_offsets", 1), unindexed);
  EXPECT_EQ(ShiftFieldIndex(status, "observations.series", 0), status);
  FieldPath path = ParseFieldPath("a[9223372036854775807]");
  EXPECT_FALSE(ShiftFieldIndex(&path, ParseFieldPath("a"), 1));
  EXPECT_EQ(FormatFieldPath(path), "a[9223372036854775807]");
  EXPECT_TRUE(ShiftFieldIndex(&path, ParseFieldPath("a"), -7));
  EXPECT_EQ(FormatFieldPath(path), "a[9223372036854775800]");
}

TEST(EditFieldPath, AnyEditRendersTheMessageAgain) {
  const absl::Status status = InvalidField("a.b[1]", "why");
  const absl::Status edited = EditFieldPath(status, [](FieldPath* path) {
    path->pop_back();
    return true;
  });
  EXPECT_EQ(edited.message(), "a: why");
  EXPECT_EQ(EditFieldPath(status, [](FieldPath*) { return false; }), status);
}

TEST(QuoteForError, CutsLongTextAtACharacterBoundary) {
  EXPECT_EQ(QuoteForError("UTC", 8), "\"UTC\"");
  EXPECT_EQ(QuoteForError("\xC3\xA9\xC3\xA9", 3), "\"\xC3\xA9...(4 bytes)\"");
}

}  // namespace
}  // namespace phasor
