#include "router/api/generation_service.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/rpc/grpc_status.h"
#include "common/rpc/raw_message.h"
#include "common/rpc/rejected_stream.h"
#include "common/text/detokenizer.h"
#include "glog/logging.h"
#include "router/api/front_metadata.h"

namespace pdserve::router {

GenerationService::GenerationService(const ModelCard& model, const RouterConfig& config,
                                     WorkerRegistry* registry, RouterMetrics* metrics)
    : model_(model),
      config_(config),
      registry_(registry),
      metrics_(metrics),
      validator_(model, config),
      breaker_(config.breaker_options()),
      // Two load reports apart at least: the next move off a worker is
      // decided on a report taken after the last one.
      rebalance_(absl::Milliseconds(std::max<int64_t>(1000, 2 * config.load_poll_ms))),
      clients_(config.max_streams_per_client) {
  env_.model = &model_;
  env_.config = &config_;
  env_.validator = &validator_;
  env_.registry = registry_;
  env_.decode_ticket = &decode_ticket_;
  env_.prefill_ticket = &prefill_ticket_;
  env_.metrics = metrics_;
  env_.breaker = &breaker_;
  env_.ledger = &ledger_;
  env_.rebalance = &rebalance_;
  env_.on_destroyed = [this] { OnCallDestroyed(); };
}

namespace {

// The first value of metadata `key`, or "".
std::string MetadataValue(const grpc::CallbackServerContext& context, const char* key) {
  auto it = context.client_metadata().find(key);
  if (it == context.client_metadata().end()) return "";
  return std::string(it->second.data(), it->second.size());
}

}  // namespace

bool GenerationService::FromFront(const grpc::CallbackServerContext& context) const {
  return !front_key_.empty() && MetadataValue(context, kFrontKeyMetadata) == front_key_;
}

std::string GenerationService::PeerOf(const grpc::CallbackServerContext& context) const {
  return FromFront(context) ? MetadataValue(context, kFrontPeerMetadata) : context.peer();
}

absl::StatusOr<std::string> GenerationService::Identify(
    const grpc::CallbackServerContext& context) const {
  if (!auth_.has_value()) return PeerHost(PeerOf(context));
  absl::StatusOr<std::string> who = auth_->Check(context);
  if (!who.ok())
    LOG(WARNING) << "unauthenticated call from " << PeerOf(context) << ": " << who.status();
  return who;
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* GenerationService::Generate(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* body) {
  const Api api = FromFront(*context) ? Api::kOpenAi : Api::kGrpc;
  auto refuse = [this, api](grpc::Status status) {
    if (metrics_ != nullptr) metrics_->CountRequest(status.error_code(), api);
    return new RejectedStream(std::move(status));
  };
  absl::StatusOr<std::string> client = Identify(*context);
  if (!client.ok()) return refuse(ToGrpcStatus(client.status()));
  v1::GenerateRequest request;
  if (absl::Status s = ParseRawRequest(*body, context->peer(), &request); !s.ok()) {
    return refuse(ToGrpcStatus(s));
  }
  if (!clients_.TryAcquire(*client)) {
    LOG(WARNING) << "rejecting a request of " << *client << ": " << config_.max_streams_per_client
                 << " streams already open";
    return refuse(
        grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                     absl::StrCat("this client already has ", config_.max_streams_per_client,
                                  " streams open (--max_streams_per_client); retry later")));
  }
  if (!TryAdmit()) {
    clients_.Release(*client);
    LOG(WARNING) << "rejecting a request: " << config_.max_queue << " already in flight";
    return refuse(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                               absl::StrCat("router is at capacity (", config_.max_queue,
                                            " requests in flight, --max_queue); retry later")));
  }
  // The call gives its client's slot back when it is destroyed.
  GenerateCall::Env env = env_;
  env.api = api;
  env.on_destroyed = [this, who = *client] {
    clients_.Release(who);
    OnCallDestroyed();
  };
  return GenerateCall::Create(env, context, request);
}

absl::Status GenerationService::Accept(const grpc::CallbackServerContext& context,
                                       const grpc::ByteBuffer& body,
                                       google::protobuf::Message* request) const {
  if (absl::StatusOr<std::string> who = Identify(context); !who.ok()) return who.status();
  return ParseRawRequest(body, context.peer(), request);
}

grpc::ServerUnaryReactor* GenerationService::Tokenize(grpc::CallbackServerContext* context,
                                                      const grpc::ByteBuffer* body,
                                                      grpc::ByteBuffer* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  v1::TokenizeRequest request;
  absl::Status status = Accept(*context, *body, &request);
  if (status.ok()) {
    absl::StatusOr<v1::TokenizeResponse> result = Tokenized(request);
    if (result.ok()) *response = SerializeRawMessage(*result);
    status = result.status();
  }
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

absl::StatusOr<v1::TokenizeResponse> GenerationService::Tokenized(
    const v1::TokenizeRequest& request) const {
  absl::StatusOr<std::vector<int32_t>> ids;
  if (request.input_case() == v1::TokenizeRequest::kText) {
    ids = validator_.EncodeText(request.text());
  } else if (request.input_case() == v1::TokenizeRequest::kChat) {
    ids = validator_.EncodeChat(request.chat());
  } else {
    ids = absl::InvalidArgumentError("exactly one of text or chat must be set");
  }
  if (!ids.ok()) return ids.status();
  // Pieces are shown as text: a token that is part of a multi-byte
  // character becomes U+FFFD (proto strings must be valid UTF-8).
  v1::TokenizeResponse response;
  IncrementalDetokenizer piece(model_.tokenizer(), /*render_special=*/true);
  for (int32_t id : *ids) {
    response.add_ids(id);
    response.add_pieces(piece.Push(id) + piece.Flush());
  }
  return response;
}

grpc::ServerUnaryReactor* GenerationService::GetModelInfo(grpc::CallbackServerContext* context,
                                                          const grpc::ByteBuffer* body,
                                                          grpc::ByteBuffer* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  v1::GetModelInfoRequest request;
  absl::Status status = Accept(*context, *body, &request);
  if (status.ok()) *response = SerializeRawMessage(DescribeModel());
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

v1::ModelInfo GenerationService::DescribeModel() const {
  v1::ModelInfo info;
  const ModelConfig& c = model_.config();
  info.set_name(c.name);
  info.set_fingerprint(model_.fingerprint());
  info.set_context_length(c.context_length);
  info.set_vocab_size(model_.tokenizer().vocab_size());
  // The KV layout is the decode tier's (block size and dtype are worker
  // settings); the model's shape is the fallback before any worker is live.
  v1::KvLayout* layout = info.mutable_kv_layout();
  layout->set_num_layers(c.n_layers);
  layout->set_num_kv_heads(c.n_kv_heads);
  layout->set_head_dim(c.head_dim);
  for (const WorkerState& w : registry_->snapshot()->decode) {
    if (w.has_info && w.info.model_fingerprint() == model_.fingerprint()) {
      *layout = w.info.kv_layout();
      break;
    }
  }
  return info;
}

bool GenerationService::TryAdmit() {
  absl::MutexLock lock(&mu_);
  if (in_flight_ >= config_.max_queue) return false;
  ++in_flight_;
  return true;
}

void GenerationService::OnCallDestroyed() {
  absl::MutexLock lock(&mu_);
  --in_flight_;
}

void GenerationService::WaitForCalls() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](int* n) { return *n == 0; }, &in_flight_));
}

int GenerationService::calls_in_flight() const {
  absl::MutexLock lock(&mu_);
  return in_flight_;
}

}  // namespace pdserve::router
