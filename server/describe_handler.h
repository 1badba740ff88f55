// File: server/describe_handler.h
//
// Describe and ListProfiles, and what the server checks of its profiles:
// Describe reports what a spec's frequency ladder can tell apart (its
// frequencies, wavelengths and similarity curve, core/describe.h), or for a
// relative_bias spec the distances each bucket covers; ListProfiles lists
// the --profiles file's specs. A request that names a profile gets errors
// about that profile's spec at the field it sent (SpecErrorsToProfile).
//
// Thread-safety: reentrant; a HandlerContext is per call.
#ifndef PHASOR_SERVER_DESCRIBE_HANDLER_H_
#define PHASOR_SERVER_DESCRIBE_HANDLER_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "phasor/v1/encoder.pb.h"
#include "server/handler_context.h"
#include "server/profiles.h"

namespace phasor::server {

absl::Status HandleDescribe(const HandlerContext& context,
                            const v1::DescribeRequest& request,
                            v1::DescribeResponse* response);

absl::Status HandleListProfiles(const HandlerContext& context,
                                const v1::ListProfilesRequest& request,
                                v1::ListProfilesResponse* response);

// A request that names a profile sent no spec, so errors core/ reports on
// the profile's spec ("spec.rope.rotary_dim: ...") are re-addressed to the
// field it did send, "profile", with the spec path kept in the description.
// Other statuses are returned unchanged.
absl::Status SpecErrorsToProfile(const absl::Status& status,
                                 absl::string_view profile);

// Checks that every profile's spec is valid, as if a request had named it.
// Called once at startup; the error names the profile.
absl::Status ValidateProfiles(const ProfileRegistry& profiles);

}  // namespace phasor::server

#endif  // PHASOR_SERVER_DESCRIBE_HANDLER_H_
