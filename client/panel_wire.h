// File: client/panel_wire.h
//
// The bytes of a panel's sub-calls (client/panel_split.h), encoded and
// decoded by hand so that rows and features are copied once, straight
// between the panel's tensors and gRPC's slices, instead of through a
// protobuf message: a piece's request holds rows [row_begin, row_end) of
// the panel's row tensors by reference until gRPC sends them, and a piece's
// response writes its features.data into its rows of the joined features.
//
// The encoding is protobuf's (protobuf.dev, "Encoding"): a reader that
// parses the bytes as an EncodeObservationsRequest sees the request
// BuildSubRequest gave plus the piece's rows; the decoder accepts any valid
// EncodeObservationsResponse and rejects every malformed or truncated one
// as DATA_LOSS.
//
// Thread-safety: pure functions; the ByteBuffer a call returns refers to the
// panel's tensors, which must outlive it.
#ifndef PHASOR_CLIENT_PANEL_WIRE_H_
#define PHASOR_CLIENT_PANEL_WIRE_H_

#include <cstddef>

#include <grpcpp/support/byte_buffer.h>

#include "absl/status/status.h"
#include "client/panel_split.h"
#include "phasor/v1/encoder.pb.h"

namespace phasor {
namespace panel {

// The encoded sub-request: `sub` (BuildSubRequest) with rows [row_begin,
// row_end) of each of `request`'s row tensors added to its observations.
// The rows are copied once, into the slices gRPC sends; protobuf never
// holds them. A singular message field may be split or reordered on the
// wire, but one `observations` field holding everything is written here.
grpc::ByteBuffer EncodeSubRequest(const v1::EncodeObservationsRequest& request,
                                  v1::EncodeObservationsRequest sub,
                                  const SubCall& call);

// Reads an EncodeObservationsResponse from the wire, copying features.data
// straight to `features_out` (which has room for `features_capacity`
// bytes) and parsing the rest into `response` (features without its data).
// `features_bytes` is how many bytes features.data held. DATA_LOSS when the
// bytes are not such a message or the data does not fit.
absl::Status DecodeSubResponse(grpc::ByteBuffer* buffer, char* features_out,
                               size_t features_capacity,
                               v1::EncodeObservationsResponse* response,
                               size_t* features_bytes);

}  // namespace panel
}  // namespace phasor

#endif  // PHASOR_CLIENT_PANEL_WIRE_H_
