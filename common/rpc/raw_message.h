// Raw request parsing for callback services registered with gRPC's
// WithRawCallbackMethod_* (request and response as grpc::ByteBuffer): the
// router's public API and both workers' services.
//
// Why: gRPC's typed callback handlers answer a body that does not parse
// (bytes that are not the message, or a proto3 string field that is not
// valid UTF-8) with UNIMPLEMENTED and an empty message before any service
// code runs, and log nothing. A raw method parses here instead, so the
// client gets INVALID_ARGUMENT naming the message type and the server logs
// the peer.
//
// Stateless; thread-safe.
#ifndef PDSERVE_COMMON_RPC_RAW_MESSAGE_H_
#define PDSERVE_COMMON_RPC_RAW_MESSAGE_H_

#include <string>

#include "absl/status/status.h"
#include "common/rpc/grpc_status.h"
#include "glog/logging.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "grpcpp/support/proto_buffer_writer.h"

namespace pdserve {

// INVALID_ARGUMENT naming `type_name` and the body's size; logs `peer`.
absl::Status MalformedRequestError(const std::string& type_name, size_t body_bytes,
                                   const std::string& peer);

// Parses `body` into `message` (cleared first).
template <typename Message>
absl::Status ParseRawRequest(const grpc::ByteBuffer& body, const std::string& peer,
                             Message* message) {
  grpc::ByteBuffer copy(body);  // parsing consumes the buffer; the copy shares its slices
  message->Clear();
  bool parsed = false;
  {
    grpc::ProtoBufferReader reader(&copy);
    parsed = reader.status().ok() && message->ParseFromZeroCopyStream(&reader);
  }
  if (parsed) return absl::OkStatus();
  return MalformedRequestError(message->GetTypeName(), body.Length(), peer);
}

// The wire form of `message`, for a raw method's response or write.
template <typename Message>
grpc::ByteBuffer SerializeRawMessage(const Message& message) {
  grpc::ByteBuffer out;
  bool own_buffer = false;
  // Fails only for messages over 2 GiB, which pdserve never builds.
  CHECK(grpc::SerializationTraits<Message>::Serialize(message, &out, &own_buffer).ok())
      << message.GetTypeName() << " of " << message.ByteSizeLong() << " bytes";
  return out;
}

// The default reactor of a unary call, already finished with `status` (a
// refusal before any work).
inline grpc::ServerUnaryReactor* FinishedUnary(grpc::CallbackServerContext* context,
                                               const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// Serves a raw unary method whose answer needs only the request: parses
// `body` as a Request and, if it parses, sends `answer(request)` (a message).
template <typename Request, typename AnswerFn>
grpc::ServerUnaryReactor* AnswerRawUnary(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer& body, grpc::ByteBuffer* response,
                                         AnswerFn answer) {
  Request request;
  const absl::Status parsed = ParseRawRequest(body, context->peer(), &request);
  if (parsed.ok()) *response = SerializeRawMessage(answer(request));
  return FinishedUnary(context, parsed);
}

}  // namespace pdserve

#endif  // PDSERVE_COMMON_RPC_RAW_MESSAGE_H_
