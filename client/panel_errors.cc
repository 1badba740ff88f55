#include "client/panel_errors.h"

#include <cstdint>
#include <functional>
#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "client/status_details.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"

namespace phasor {
namespace panel {
namespace {

// The server names rows as observations.series[k]... with k counted within
// the sub-call; this shifts k to the panel's numbering.
std::string RenumberSeries(absl::string_view message, int64_t first_series) {
  constexpr absl::string_view kSeries = "series[";
  std::string out;
  size_t at = 0;
  while (true) {
    const size_t found = message.find(kSeries, at);
    if (found == absl::string_view::npos) break;
    const size_t digits = found + kSeries.size();
    const size_t close = message.find(']', digits);
    int64_t index;
    if (close == absl::string_view::npos ||
        !absl::SimpleAtoi(message.substr(digits, close - digits), &index)) {
      absl::StrAppend(&out, message.substr(at, digits - at));
      at = digits;
      continue;
    }
    absl::StrAppend(&out, message.substr(at, digits - at),
                    index + first_series);
    at = close;
  }
  absl::StrAppend(&out, message.substr(at));
  return out;
}

// A sub-call's field path in the panel's numbering, for the structured
// field violations (RenumberSeries does the message): series[k] becomes
// series[first_series + k] and, in a chunk that continues its series
// `row_shift` rows in, the index of the row tensor after it moves by that
// many rows (by row_shift times the values per row for values, mask and
// content, which the server indexes per value).
std::string PanelFieldPath(absl::string_view path, int64_t first_series,
                           int64_t row_shift, const v1::Observations& observations) {
  constexpr absl::string_view kSeries = "observations.series[";
  if (!absl::StartsWith(path, kSeries)) return std::string(path);
  const size_t close = path.find(']', kSeries.size());
  int64_t series;
  if (close == absl::string_view::npos ||
      !absl::SimpleAtoi(path.substr(kSeries.size(), close - kSeries.size()),
                        &series)) {
    return std::string(path);
  }
  absl::string_view rest = path.substr(close + 1);
  const std::string renumbered = absl::StrCat(kSeries, first_series + series, "]");
  const size_t open = rest.find('[');
  if (row_shift == 0 || series != 0 || !absl::StartsWith(rest, ".") ||
      open == absl::string_view::npos || !absl::EndsWith(rest, "]")) {
    return absl::StrCat(renumbered, rest);
  }
  const absl::string_view name = rest.substr(1, open - 1);
  int64_t index;
  if (!absl::SimpleAtoi(rest.substr(open + 1, rest.size() - open - 2), &index)) {
    return absl::StrCat(renumbered, rest);
  }
  const v1::Tensor* per_value = name == "values"    ? &observations.values()
                                : name == "mask"    ? &observations.mask()
                                : name == "content" ? &observations.content()
                                                    : nullptr;
  int64_t per_row = 1;
  if (per_value != nullptr) {
    for (int d = 1; d < per_value->shape_size(); ++d) per_row *= per_value->shape(d);
  } else if (name != "timestamps" && name != "event_times" &&
             name != "event_channels" && name != "event_values") {
    return absl::StrCat(renumbered, rest);
  }
  return absl::StrCat(renumbered, ".", name, "[", index + row_shift * per_row, "]");
}

// `status` with the field paths of its google.rpc.BadRequest details passed
// through `renumber`.
void RenumberViolations(
    const std::function<std::string(absl::string_view)>& renumber,
    absl::Status* status) {
  const auto payload = status->GetPayload(kGrpcStatusDetailsPayload);
  if (!payload) return;
  google::rpc::Status details;
  if (!details.ParseFromString(std::string(*payload))) return;
  for (google::protobuf::Any& any : *details.mutable_details()) {
    google::rpc::BadRequest bad_request;
    if (!any.UnpackTo(&bad_request)) continue;
    for (auto& violation : *bad_request.mutable_field_violations()) {
      violation.set_field(renumber(violation.field()));
    }
    any.PackFrom(bad_request);
  }
  status->SetPayload(kGrpcStatusDetailsPayload,
                     absl::Cord(details.SerializeAsString()));
}

}  // namespace

absl::Status SubCallError(const absl::Status& status, const SubCall& part,
                          const PanelShape& shape,
                          const v1::Observations& observations) {
  absl::Status error(
      status.code(),
      absl::StrCat("panel sub-call for series [", part.series_begin, ", ",
                   part.series_end, ") rows [", part.row_begin, ", ",
                   part.row_end, ")",
                   part.continues ? " (continuing the series)" : "", ": ",
                   RenumberSeries(status.message(), part.series_begin)));
  status.ForEachPayload([&](absl::string_view url, const absl::Cord& payload) {
    error.SetPayload(url, payload);
  });
  const int64_t row_shift = part.row_begin - shape.offsets[part.series_begin];
  RenumberViolations(
      [&](absl::string_view field) {
        return PanelFieldPath(field, part.series_begin, row_shift, observations);
      },
      &error);
  return error;
}

}  // namespace panel
}  // namespace phasor
