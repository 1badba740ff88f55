#include "client/panel_errors.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "client/status_details.h"
#include "core/base/errors.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"

namespace phasor {
namespace panel {
namespace {

// A sub-call's field path in the panel's numbering, edited as segments
// (core/errors.h): the series index of observations.series[k], states[k]
// and observations.time_zone_index[k] moves by `first_series` and, in a
// chunk that continues its series `row_shift` rows in, the row index of
// observations.series[0].<row tensor>[i] moves by that many rows (times the
// values per row for values, mask and content, which the server indexes per
// value, row·C + channel).
void RenumberPath(FieldPath* path, int64_t first_series, int64_t row_shift,
                  const v1::Observations& observations) {
  static const FieldPath kSeries = ParseFieldPath("observations.series");
  static const FieldPath kStates = ParseFieldPath("states");
  static const FieldPath kZoneIndex = ParseFieldPath("observations.time_zone_index");
  if (row_shift != 0 && path->size() == 3 && (*path)[1].index == 0 &&
      (*path)[2].index.has_value()) {
    const FieldPathSegment& row = (*path)[2];
    const v1::Tensor* per_value = row.name == "values"    ? &observations.values()
                                  : row.name == "mask"    ? &observations.mask()
                                  : row.name == "content" ? &observations.content()
                                                          : nullptr;
    int64_t per_row = 1;
    if (per_value != nullptr) {
      for (int d = 1; d < per_value->shape_size(); ++d) per_row *= per_value->shape(d);
    }
    if (per_value != nullptr || row.name == "timestamps" || row.name == "event_times" ||
        row.name == "event_channels" || row.name == "event_values") {
      const FieldPath at = {kSeries[0], kSeries[1], {row.name, std::nullopt}};
      ShiftFieldIndex(path, at, row_shift * per_row);
    }
  }
  for (const FieldPath* at : {&kSeries, &kStates, &kZoneIndex}) {
    ShiftFieldIndex(path, *at, first_series);
  }
}

}  // namespace

absl::Status SubCallError(const absl::Status& status, const SubCall& part,
                          const PanelShape& shape,
                          const v1::Observations& observations) {
  const int64_t row_shift = part.row_begin - shape.offsets[part.series_begin];
  // The google.rpc.BadRequest violations renumbered; with the one violation
  // the server sends, the message is rendered again from it, as the server
  // renders it. A status without one names no series or row: its message
  // is kept.
  std::string message(status.message());
  std::optional<std::string> details_bytes;
  const auto payload = status.GetPayload(kGrpcStatusDetailsPayload);
  google::rpc::Status details;
  if (payload && details.ParseFromString(std::string(*payload))) {
    std::vector<std::pair<std::string, std::string>> violations;
    for (google::protobuf::Any& any : *details.mutable_details()) {
      google::rpc::BadRequest bad_request;
      if (!any.UnpackTo(&bad_request)) continue;
      for (auto& violation : *bad_request.mutable_field_violations()) {
        FieldPath path = ParseFieldPath(violation.field());
        RenumberPath(&path, part.series_begin, row_shift, observations);
        violation.set_field(FormatFieldPath(path));
        violations.emplace_back(violation.field(), violation.description());
      }
      any.PackFrom(bad_request);
    }
    if (violations.size() == 1) {
      message = RenderFieldMessage(violations[0].first, violations[0].second);
      details.set_message(message);
    }
    details_bytes = details.SerializeAsString();
  }
  absl::Status error(
      status.code(),
      absl::StrCat("panel sub-call for series [", part.series_begin, ", ",
                   part.series_end, ") rows [", part.row_begin, ", ",
                   part.row_end, ")",
                   part.continues ? " (continuing the series)" : "", ": ", message));
  status.ForEachPayload([&](absl::string_view url, const absl::Cord& payload) {
    error.SetPayload(url, payload);
  });
  if (details_bytes) {
    error.SetPayload(kGrpcStatusDetailsPayload, absl::Cord(*details_bytes));
  }
  return error;
}

}  // namespace panel
}  // namespace phasor
