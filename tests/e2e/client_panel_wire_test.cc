// The panel sub-calls' bytes (client/panel_wire.h), without a server:
// EncodeSubRequest's bytes parse as the sub-request plus the piece's rows,
// as protobuf would have built it; DecodeSubResponse reads what protobuf
// writes, across any slicing of the bytes, and a prefix of a response is
// accepted exactly when protobuf accepts it (a cut inside a field is
// DATA_LOSS).
#include "client/panel_wire.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "client/panel_split.h"
#include "client/tensor_io.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "phasor/v1/encoder.pb.h"

namespace phasor {
namespace panel {
namespace {

using google::protobuf::util::MessageDifferencer;

// `bytes` in slices of at most `slice_bytes`.
grpc::ByteBuffer Buffer(absl::string_view bytes, size_t slice_bytes) {
  std::vector<grpc::Slice> slices;
  for (size_t at = 0; at < bytes.size(); at += slice_bytes) {
    const absl::string_view part = bytes.substr(at, slice_bytes);
    slices.emplace_back(part.data(), part.size());
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

std::string Bytes(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return bytes;
}

// `rows` rows of `per_row` elements, bytes counting up from `seed`.
v1::Tensor Counting(v1::DType dtype, int64_t rows, int64_t per_row, int seed) {
  v1::Tensor tensor;
  tensor.set_dtype(dtype);
  tensor.add_shape(rows);
  if (per_row > 0) tensor.add_shape(per_row);
  std::string data(static_cast<size_t>(rows * std::max<int64_t>(per_row, 1) *
                                       DTypeBytes(dtype)),
                   '\0');
  for (size_t i = 0; i < data.size(); ++i) {
    data[i] = static_cast<char>(seed + static_cast<int>(i));
  }
  tensor.set_data(data);
  return tensor;
}

// Rows [begin, end) of `tensor`, as a message.
v1::Tensor Slice(const v1::Tensor& tensor, int64_t begin, int64_t end) {
  v1::Tensor out = tensor;
  out.set_shape(0, end - begin);
  const int64_t row_bytes = RowBytes(tensor);
  out.set_data(tensor.data().substr(static_cast<size_t>(begin * row_bytes),
                                    static_cast<size_t>((end - begin) * row_bytes)));
  return out;
}

TEST(EncodeSubRequestTest, ParsesAsTheSubRequestWithThePiecesRows) {
  v1::EncodeObservationsRequest request;
  request.set_output_dtype(v1::BFLOAT16);
  v1::Observations* observations = request.mutable_observations();
  *observations->mutable_timestamps() = Counting(v1::INT64, 10, 0, 1);
  *observations->mutable_values() = Counting(v1::FLOAT32, 10, 3, 2);
  *observations->mutable_mask() = Counting(v1::UINT8, 10, 3, 3);
  *observations->mutable_content() = Counting(v1::FLOAT16, 10, 4, 4);
  *observations->mutable_series_offsets() = TensorFromInt64s({0, 4, 10}, {3});
  observations->add_channel_names("a");
  observations->add_channel_names("b");
  observations->add_channel_names("c");
  request.mutable_spec()->mutable_temporal();
  const PanelShape shape = InspectPanel(request);
  ASSERT_TRUE(shape.ok);
  const v1::EncodeObservationsRequest shared = TemplateRequest(request, shape);

  for (const SubCall& piece : {SubCall{0, 2, 0, 10, false},
                               SubCall{1, 2, 4, 7, false},
                               SubCall{1, 2, 7, 10, true},
                               SubCall{0, 1, 0, 0, false}}) {
    SCOPED_TRACE(piece.row_begin);
    v1::SeriesState carried;
    carried.set_last_timestamp_ns(5);
    const v1::EncodeObservationsRequest sub = BuildSubRequest(
        request, shared, shape, piece, piece.continues ? &carried : nullptr);
    v1::EncodeObservationsRequest expected = sub;
    v1::Observations* rows = expected.mutable_observations();
    *rows->mutable_timestamps() =
        Slice(observations->timestamps(), piece.row_begin, piece.row_end);
    *rows->mutable_values() =
        Slice(observations->values(), piece.row_begin, piece.row_end);
    *rows->mutable_mask() =
        Slice(observations->mask(), piece.row_begin, piece.row_end);
    *rows->mutable_content() =
        Slice(observations->content(), piece.row_begin, piece.row_end);

    v1::EncodeObservationsRequest parsed;
    ASSERT_TRUE(parsed.ParseFromString(
        Bytes(EncodeSubRequest(request, sub, piece))));
    EXPECT_TRUE(MessageDifferencer::Equals(parsed, expected))
        << parsed.ShortDebugString() << "\nvs\n"
        << expected.ShortDebugString();
  }
}

v1::EncodeObservationsResponse Response() {
  v1::EncodeObservationsResponse response;
  *response.mutable_features() = Counting(v1::FLOAT32, 6, 5, 7);
  response.add_schema()->set_block("time");
  response.add_states()->set_last_timestamp_ns(42);
  response.add_states()->set_first_timestamp_ns(-3);
  *response.mutable_series_offsets() = TensorFromInt64s({0, 2, 6}, {3});
  return response;
}

TEST(DecodeSubResponseTest, ReadsWhatProtobufWritesInAnySlicing) {
  const v1::EncodeObservationsResponse response = Response();
  const std::string bytes = response.SerializeAsString();
  const std::string& data = response.features().data();
  for (const size_t slice_bytes : {size_t{1}, size_t{3}, size_t{64}, bytes.size()}) {
    SCOPED_TRACE(slice_bytes);
    grpc::ByteBuffer buffer = Buffer(bytes, slice_bytes);
    std::string features(data.size(), '\0');
    v1::EncodeObservationsResponse rest;
    size_t features_bytes = 0;
    ASSERT_TRUE(DecodeSubResponse(&buffer, features.data(), features.size(),
                                  &rest, &features_bytes)
                    .ok());
    EXPECT_EQ(features_bytes, data.size());
    EXPECT_EQ(features, data);
    v1::EncodeObservationsResponse without_data = response;
    without_data.mutable_features()->clear_data();
    EXPECT_TRUE(MessageDifferencer::Equals(rest, without_data));
  }
}

TEST(DecodeSubResponseTest, APrefixIsAcceptedExactlyWhenProtobufAcceptsIt) {
  const v1::EncodeObservationsResponse response = Response();
  const std::string bytes = response.SerializeAsString();
  for (size_t length = 0; length < bytes.size(); ++length) {
    SCOPED_TRACE(length);
    const std::string prefix = bytes.substr(0, length);
    v1::EncodeObservationsResponse reference;
    const bool protobuf_accepts = reference.ParseFromString(prefix);
    grpc::ByteBuffer buffer = Buffer(prefix, 5);
    std::string features(response.features().data().size(), '\0');
    v1::EncodeObservationsResponse rest;
    size_t features_bytes = 0;
    const absl::Status status = DecodeSubResponse(
        &buffer, features.data(), features.size(), &rest, &features_bytes);
    if (protobuf_accepts) {
      EXPECT_TRUE(status.ok()) << status;
      EXPECT_EQ(features.substr(0, features_bytes), reference.features().data());
    } else {
      EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
    }
  }
}

TEST(DecodeSubResponseTest, FeaturesLargerThanTheirRowsAreDataLoss) {
  const std::string bytes = Response().SerializeAsString();
  grpc::ByteBuffer buffer = Buffer(bytes, bytes.size());
  std::string features(10, '\0');  // Room for 10 of the 120 bytes.
  v1::EncodeObservationsResponse rest;
  size_t features_bytes = 0;
  EXPECT_EQ(DecodeSubResponse(&buffer, features.data(), features.size(), &rest,
                              &features_bytes)
                .code(),
            absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace panel
}  // namespace phasor
