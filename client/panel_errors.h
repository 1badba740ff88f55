// File: client/panel_errors.h
//
// A panel sub-call's error in the whole panel's numbering. The server
// numbers series and rows within the request it got; a piece
// (client/panel_split.h) holds series [series_begin, series_end) and, for a
// chunk of a cut series, rows from row_begin on. The error EncoderClient::
// EncodeObservationsPanel returns names them as one call with the whole
// panel would have: its field violations (FieldViolationsOf) name the
// panel's series, and rows within a series cut into chunks, and its message
// is rendered again from the violation (core/errors.h RenderFieldMessage)
// and prefixed with the piece's series and row range. Paths are edited as
// segments; no message text is read.
//
// Thread-safety: pure functions.
#ifndef PHASOR_CLIENT_PANEL_ERRORS_H_
#define PHASOR_CLIENT_PANEL_ERRORS_H_

#include "absl/status/status.h"
#include "client/panel_split.h"
#include "phasor/v1/encoder.pb.h"

namespace phasor {
namespace panel {

// `status`, a failed sub-call's error for piece `part` of the panel
// `shape` of `observations`, in the panel's numbering (see the file
// comment). Its code and other payloads are kept.
absl::Status SubCallError(const absl::Status& status, const SubCall& part,
                          const PanelShape& shape,
                          const v1::Observations& observations);

}  // namespace panel
}  // namespace phasor

#endif  // PHASOR_CLIENT_PANEL_ERRORS_H_
