#include "client/panel_wire.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/slice.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/wire_format_lite.h"

namespace phasor {
namespace panel {
namespace {

// Wire-format tag of a length-delimited field (protobuf encoding, "Message
// Structure").
uint32_t LengthDelimitedTag(int field_number) {
  return google::protobuf::internal::WireFormatLite::MakeTag(
      field_number,
      google::protobuf::internal::WireFormatLite::WIRETYPE_LENGTH_DELIMITED);
}

}  // namespace

grpc::ByteBuffer EncodeSubRequest(const v1::EncodeObservationsRequest& request,
                                  v1::EncodeObservationsRequest sub,
                                  const SubCall& call) {
  using google::protobuf::io::CodedOutputStream;
  const std::string observations_rest = sub.observations().SerializeAsString();
  sub.clear_observations();

  struct Piece {
    std::string head;  // Field tag and length, the dtype and shape, data tag.
    const char* data;
    size_t data_size;
  };
  std::vector<Piece> pieces;
  size_t observations_size = observations_rest.size();
  const v1::Observations& from = request.observations();
  for (const RowTensor& row_tensor : RowTensors()) {
    if (!(from.*row_tensor.has)()) continue;
    const v1::Tensor& tensor = (from.*row_tensor.get)();
    v1::Tensor meta;
    meta.set_dtype(tensor.dtype());
    *meta.mutable_shape() = tensor.shape();
    meta.set_shape(0, call.row_end - call.row_begin);
    const int64_t row_bytes = RowBytes(tensor);
    Piece piece;
    piece.data = tensor.data().data() + call.row_begin * row_bytes;
    piece.data_size = static_cast<size_t>((call.row_end - call.row_begin) * row_bytes);
    const uint32_t data_tag = LengthDelimitedTag(v1::Tensor::kDataFieldNumber);
    const size_t tensor_size =
        meta.ByteSizeLong() +
        (piece.data_size == 0 ? 0
                              : CodedOutputStream::VarintSize32(data_tag) +
                                    CodedOutputStream::VarintSize64(piece.data_size) +
                                    piece.data_size);
    {
      google::protobuf::io::StringOutputStream raw(&piece.head);
      CodedOutputStream out(&raw);
      out.WriteTag(LengthDelimitedTag(row_tensor.field_number));
      out.WriteVarint64(tensor_size);
      meta.SerializeWithCachedSizes(&out);
      if (piece.data_size > 0) {
        out.WriteTag(data_tag);
        out.WriteVarint64(piece.data_size);
      }
    }
    observations_size += piece.head.size() + piece.data_size;
    pieces.push_back(std::move(piece));
  }

  std::string head = sub.SerializeAsString();
  {
    google::protobuf::io::StringOutputStream raw(&head);
    CodedOutputStream out(&raw);
    out.WriteTag(LengthDelimitedTag(
        v1::EncodeObservationsRequest::kObservationsFieldNumber));
    out.WriteVarint64(observations_size);
    out.WriteString(observations_rest);
  }
  std::vector<grpc::Slice> slices;
  slices.reserve(1 + 2 * pieces.size());
  slices.emplace_back(head);
  for (const Piece& piece : pieces) {
    slices.emplace_back(piece.head);
    if (piece.data_size > 0) slices.emplace_back(piece.data, piece.data_size);
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

absl::Status DecodeSubResponse(grpc::ByteBuffer* buffer, char* features_out,
                               size_t features_capacity,
                               v1::EncodeObservationsResponse* response,
                               size_t* features_bytes) {
  using google::protobuf::internal::WireFormatLite;
  const uint32_t features_tag =
      LengthDelimitedTag(v1::EncodeObservationsResponse::kFeaturesFieldNumber);
  const uint32_t data_tag = LengthDelimitedTag(v1::Tensor::kDataFieldNumber);
  const auto malformed = [](absl::string_view what) {
    return absl::DataLossError(absl::StrCat(
        "EncodeObservationsPanel: a sub-call's response is malformed (", what,
        ")"));
  };
  *features_bytes = 0;
  bool have_data = false;
  std::string rest, features_rest;
  {
    grpc::ProtoBufferReader reader(buffer);
    google::protobuf::io::CodedInputStream in(&reader);
    google::protobuf::io::StringOutputStream rest_raw(&rest);
    google::protobuf::io::CodedOutputStream rest_out(&rest_raw);
    google::protobuf::io::StringOutputStream features_raw(&features_rest);
    google::protobuf::io::CodedOutputStream features_out_stream(&features_raw);
    while (const uint32_t tag = in.ReadTag()) {
      if (tag != features_tag) {
        if (!WireFormatLite::SkipField(&in, tag, &rest_out)) {
          return malformed("a field");
        }
        continue;
      }
      uint64_t length;
      if (!in.ReadVarint64(&length) ||
          length > static_cast<uint64_t>(in.BytesUntilTotalBytesLimit())) {
        return malformed("features' length");
      }
      const auto limit = in.PushLimit(static_cast<int>(length));
      while (const uint32_t inner = in.ReadTag()) {
        if (inner != data_tag) {
          if (!WireFormatLite::SkipField(&in, inner, &features_out_stream)) {
            return malformed("a field of features");
          }
          continue;
        }
        uint64_t size;
        if (!in.ReadVarint64(&size) ||
            size > static_cast<uint64_t>(std::max(in.BytesUntilLimit(), 0))) {
          return malformed("features.data's length");
        }
        if (have_data) return malformed("features.data twice");
        if (size > features_capacity) {
          return malformed(absl::StrCat("features.data of ", size,
                                        " bytes where ", features_capacity,
                                        " were expected"));
        }
        if (size > 0 && !in.ReadRaw(features_out, static_cast<int>(size))) {
          return malformed("features.data cut short");
        }
        have_data = true;
        *features_bytes = size;
      }
      // The features field ended where its length said (not at the end of
      // the bytes before that).
      if (!in.ConsumedEntireMessage() || in.BytesUntilLimit() != 0) {
        return malformed("features");
      }
      in.PopLimit(limit);
    }
    if (!in.ConsumedEntireMessage()) return malformed("the message");
  }
  if (!response->ParseFromString(rest) ||
      !response->mutable_features()->ParseFromString(features_rest)) {
    return malformed("its fields");
  }
  return absl::OkStatus();
}

}  // namespace panel
}  // namespace phasor
