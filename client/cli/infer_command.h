// phasor-client infer: one Open Inference Protocol ModelInfer call
// (inference.GRPCInferenceService, proto/inference/grpc_service.proto) to a
// model, that is a server profile, with inputs read from files:
//
//   phasor-client infer --model llama-rope
//       --inputs query=q.npy,positions=pos.npy --outputs query=q_rot.npy
//   (one command line)
//
// --inputs: name=file pairs; a .npy or CSV file is a tensor (sent as raw
// contents under the protocol's datatype name: FP32, FP16, BF16, FP64,
// INT64, INT32, UINT8, BOOL), any other file one BYTES element holding its
// bytes (a series state written by an earlier call). --outputs: the outputs
// to return, each written to its file (.npy, else CSV; a one-element BYTES
// output as its bytes); without --outputs every output is returned and
// printed. --parameters: key=value request parameters (true/false,
// integers, decimals, otherwise strings), e.g. output_dtype=FP16.
// Response parameters (attention_factor, the feature schema) are printed.
#ifndef PHASOR_CLIENT_CLI_INFER_COMMAND_H_
#define PHASOR_CLIENT_CLI_INFER_COMMAND_H_

#include "absl/status/status.h"
#include "client/encoder_client.h"

namespace phasor::cli {

absl::Status RunInfer(const EncoderClient& client);

}  // namespace phasor::cli

#endif  // PHASOR_CLIENT_CLI_INFER_COMMAND_H_
