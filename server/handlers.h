// File: server/handlers.h
//
// The Encoder RPCs as plain functions, Handle<Rpc>(context, request,
// response) -> absl::Status with a field path on failure, one header per
// RPC family. Each resolves the spec (inline or profile), converts and
// checks the request (server/convert.h, server/spec_convert.h,
// server/observations_convert.h), lets core/ validate, runs the core kernel
// and writes the response, checking between those steps that the call is
// still wanted (server/handler_context.h). The gRPC plumbing (auth,
// reactors, status conversion, metrics) is server/encoder_service.cc's.
//
//   positions_handler.h  EncodePositions
//   rope_handler.h       ApplyRope, RopeTables
//   temporal_handler.h   EncodeObservations and its stream
//   relative_handler.h   AlibiBias, RelativeBias
//   describe_handler.h   Describe, ListProfiles; profile checks
//
// This header includes them all, for code that calls several families (the
// services, the fuzz targets).
//
// Thread-safety: the functions are reentrant; a HandlerContext is per call.
#ifndef PHASOR_SERVER_HANDLERS_H_
#define PHASOR_SERVER_HANDLERS_H_

#include "server/describe_handler.h"    // IWYU pragma: export
#include "server/handler_context.h"     // IWYU pragma: export
#include "server/positions_handler.h"   // IWYU pragma: export
#include "server/relative_handler.h"    // IWYU pragma: export
#include "server/rope_handler.h"        // IWYU pragma: export
#include "server/temporal_handler.h"    // IWYU pragma: export

#endif  // PHASOR_SERVER_HANDLERS_H_
