#include "router/generation_service.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/detokenizer.h"
#include "common/grpc_status.h"
#include "glog/logging.h"

namespace pdserve {
namespace {

// The reactor for a request refused before any work (admission control).
class RejectedCall : public grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  explicit RejectedCall(grpc::Status status) { Finish(std::move(status)); }
  void OnDone() override { delete this; }
};

}  // namespace

GenerationService::GenerationService(const Model& model, const RouterConfig& config,
                                     WorkerRegistry* registry, RouterMetrics* metrics)
    : model_(model),
      config_(config),
      registry_(registry),
      metrics_(metrics),
      validator_(model, config),
      breaker_(config.breaker_options()),
      clients_(config.max_streams_per_client) {
  env_.model = &model_;
  env_.config = &config_;
  env_.validator = &validator_;
  env_.registry = registry_;
  env_.decode_ticket = &decode_ticket_;
  env_.prefill_ticket = &prefill_ticket_;
  env_.metrics = metrics_;
  env_.breaker = &breaker_;
  env_.on_destroyed = [this] { OnCallDestroyed(); };
}

absl::StatusOr<std::string> GenerationService::Identify(
    const grpc::CallbackServerContext& context) const {
  if (!auth_.has_value()) return PeerHost(context.peer());
  absl::StatusOr<std::string> who = auth_->Check(context);
  if (!who.ok()) LOG(WARNING) << "unauthenticated call from " << context.peer() << ": " << who.status();
  return who;
}

grpc::ServerWriteReactor<v1::GenerateResponse>* GenerationService::Generate(
    grpc::CallbackServerContext* context, const v1::GenerateRequest* request) {
  absl::StatusOr<std::string> client = Identify(*context);
  if (!client.ok()) {
    if (metrics_ != nullptr) metrics_->CountRequest(grpc::StatusCode::UNAUTHENTICATED);
    return new RejectedCall(ToGrpcStatus(client.status()));
  }
  if (!clients_.TryAcquire(*client)) {
    LOG(WARNING) << "rejecting a request of " << *client << ": "
                 << config_.max_streams_per_client << " streams already open";
    if (metrics_ != nullptr) metrics_->CountRequest(grpc::StatusCode::RESOURCE_EXHAUSTED);
    return new RejectedCall(grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        absl::StrCat("this client already has ", config_.max_streams_per_client,
                     " streams open (--max_streams_per_client); retry later")));
  }
  if (!TryAdmit()) {
    clients_.Release(*client);
    LOG(WARNING) << "rejecting a request: " << config_.max_queue << " already in flight";
    if (metrics_ != nullptr) metrics_->CountRequest(grpc::StatusCode::RESOURCE_EXHAUSTED);
    return new RejectedCall(
        grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                     absl::StrCat("router is at capacity (", config_.max_queue,
                                  " requests in flight, --max_queue); retry later")));
  }
  // The call gives its client's slot back when it is destroyed.
  GenerateCall::Env env = env_;
  env.on_destroyed = [this, who = *client] {
    clients_.Release(who);
    OnCallDestroyed();
  };
  return GenerateCall::Create(env, context, *request);
}

grpc::ServerUnaryReactor* GenerationService::Tokenize(grpc::CallbackServerContext* context,
                                                      const v1::TokenizeRequest* request,
                                                      v1::TokenizeResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::StatusOr<std::string> who = Identify(*context); !who.ok()) {
    reactor->Finish(ToGrpcStatus(who.status()));
    return reactor;
  }
  absl::StatusOr<std::vector<int32_t>> ids;
  if (request->input_case() == v1::TokenizeRequest::kText) {
    ids = validator_.EncodeText(request->text());
  } else if (request->input_case() == v1::TokenizeRequest::kChat) {
    ids = validator_.EncodeChat(request->chat());
  } else {
    ids = absl::InvalidArgumentError("exactly one of text or chat must be set");
  }
  if (!ids.ok()) {
    reactor->Finish(ToGrpcStatus(ids.status()));
    return reactor;
  }
  // Pieces are shown as text: a token that is part of a multi-byte
  // character becomes U+FFFD (proto strings must be valid UTF-8).
  IncrementalDetokenizer piece(model_.tokenizer(), /*render_special=*/true);
  for (int32_t id : *ids) {
    response->add_ids(id);
    response->add_pieces(piece.Push(id) + piece.Flush());
  }
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* GenerationService::GetModelInfo(grpc::CallbackServerContext* context,
                                                          const v1::GetModelInfoRequest*,
                                                          v1::ModelInfo* response) {
  if (absl::StatusOr<std::string> who = Identify(*context); !who.ok()) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(ToGrpcStatus(who.status()));
    return reactor;
  }
  const ModelConfig& c = model_.config();
  response->set_name(c.name);
  response->set_fingerprint(model_.fingerprint());
  response->set_context_length(c.context_length);
  response->set_vocab_size(model_.tokenizer().vocab_size());
  // The KV layout is the decode tier's (block size and dtype are worker
  // settings); the model's shape is the fallback before any worker is live.
  v1::KvLayout* layout = response->mutable_kv_layout();
  layout->set_num_layers(c.n_layers);
  layout->set_num_kv_heads(c.n_kv_heads);
  layout->set_head_dim(c.head_dim);
  for (const WorkerState& w : registry_->snapshot()->decode) {
    if (w.has_info && w.info.model_fingerprint() == model_.fingerprint()) {
      *layout = w.info.kv_layout();
      break;
    }
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
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

}  // namespace pdserve
