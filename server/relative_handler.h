// File: server/relative_handler.h
//
// The relative-position RPCs: AlibiBias (core/alibi.h: ALiBi's per-head
// slopes and the [H, q_len, k_len] bias) and RelativeBias
// (core/relative_bias.h: T5 and Shaw buckets, their real-time forms, time
// ALiBi, bucket ids and a learned table's bias), plus what Describe and
// profile validation need of a relative_bias spec. Sizes are checked from
// the request's shapes before anything the output implies is allocated (a
// range is not materialised until then either).
//
// Thread-safety: reentrant; a HandlerContext is per call.
#ifndef PHASOR_SERVER_RELATIVE_HANDLER_H_
#define PHASOR_SERVER_RELATIVE_HANDLER_H_

#include "absl/status/status.h"
#include "phasor/v1/encoder.pb.h"
#include "server/handler_context.h"
#include "server/profiles.h"

namespace phasor::server {

absl::Status HandleAlibiBias(const HandlerContext& context,
                             const v1::AlibiBiasRequest& request,
                             v1::AlibiBiasResponse* response);
absl::Status HandleRelativeBias(const HandlerContext& context,
                                const v1::RelativeBiasRequest& request,
                                v1::RelativeBiasResponse* response);

// Describe for a relative_bias spec: the distances each bucket covers.
absl::Status DescribeRelativeBias(const HandlerContext& context,
                                  const v1::RelativeBiasSpec& spec,
                                  v1::DescribeResponse* response);

// Checks a relative_bias spec from a profile (and the table it names).
absl::Status ValidateRelativeBiasProfile(const ProfileRegistry& profiles,
                                         const v1::RelativeBiasSpec& spec);

}  // namespace phasor::server

#endif  // PHASOR_SERVER_RELATIVE_HANDLER_H_
