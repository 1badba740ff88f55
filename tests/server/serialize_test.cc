// SerializeWithinLimit (server/encoder_service.h): large tensors travel as
// slices over their own buffers, appended after the rest of the message;
// the bytes must parse to exactly the message protobuf would have sent.
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "google/protobuf/util/message_differencer.h"
#include "phasor/v1/encoder.pb.h"
#include "server/encoder_service.h"

namespace phasor::server {
namespace {

std::string Pattern(size_t size, int seed) {
  std::string bytes(size, '\0');
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>((i * 131 + seed) & 0xff);
  return bytes;
}

void SetTensor(v1::Tensor* tensor, std::vector<int64_t> shape, size_t bytes, int seed) {
  for (int64_t extent : shape) tensor->add_shape(extent);
  tensor->set_dtype(v1::FLOAT32);
  tensor->set_data(Pattern(bytes, seed));
}

std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return bytes;
}

// Serializes a copy of `message` and parses the bytes back.
template <typename Message>
void ExpectRoundTrip(const Message& message, size_t expected_slices_at_least) {
  Message sent = message;
  grpc::ByteBuffer buffer;
  ASSERT_TRUE(SerializeWithinLimit(&sent, int64_t{1} << 30, "field", &buffer).ok());
  EXPECT_EQ(buffer.Length(), message.ByteSizeLong());
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(buffer.Dump(&slices).ok());
  EXPECT_GE(slices.size(), expected_slices_at_least);
  Message parsed;
  ASSERT_TRUE(parsed.ParseFromString(Flatten(buffer)));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(parsed, message))
      << parsed.ShortDebugString().substr(0, 300);
}

TEST(SerializeWithinLimit, LargeTensorsParseBackToTheSameMessage) {
  v1::ApplyRopeResponse rope;
  // 192 KiB and exactly the threshold: both detached; the order of the
  // detached fields differs from their numbers' order.
  SetTensor(rope.mutable_query(), {192, 2, 128}, 192 * 2 * 128 * 4, 1);
  SetTensor(rope.mutable_key(), {16, 4, 256}, kZeroCopyTensorBytes, 2);
  rope.set_attention_factor(1.25);
  ExpectRoundTrip(rope, /*expected_slices_at_least=*/5);
}

TEST(SerializeWithinLimit, SmallTensorsAndOtherFieldsStayInline) {
  v1::EncodeObservationsResponse response;
  SetTensor(response.mutable_features(), {3, 4}, 48, 3);
  v1::SchemaEntry* entry = response.add_schema();
  entry->set_block("time");
  entry->set_width(4);
  entry->set_meaning("sin, cos of the time since the first observation");
  response.mutable_state()->set_last_timestamp_ns(123456789);
  ExpectRoundTrip(response, /*expected_slices_at_least=*/1);
  // Large features with the same schema and state.
  response.mutable_features()->Clear();
  SetTensor(response.mutable_features(), {1024, 64}, 1024 * 64 * 4, 4);
  ExpectRoundTrip(response, /*expected_slices_at_least=*/3);
}

TEST(SerializeWithinLimit, OverTheLimitIsResourceExhaustedAndNothingIsMoved) {
  v1::ApplyRopeResponse rope;
  SetTensor(rope.mutable_query(), {256, 2, 128}, 256 * 2 * 128 * 4, 5);
  grpc::ByteBuffer buffer;
  const absl::Status status =
      SerializeWithinLimit(&rope, /*max_message_bytes=*/1 << 16, "query", &buffer);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(status.message().find("query"), absl::string_view::npos);
  EXPECT_EQ(rope.query().data().size(), size_t{256 * 2 * 128 * 4});
}

}  // namespace
}  // namespace phasor::server
