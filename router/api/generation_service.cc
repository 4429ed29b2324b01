#include "router/api/generation_service.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/rpc/grpc_status.h"
#include "common/rpc/raw_message.h"
#include "common/rpc/rejected_stream.h"
#include "common/text/detokenizer.h"
#include "glog/logging.h"
#include "router/api/grpc_generate_stream.h"

namespace pdserve::router {

GenerationService::GenerationService(const ModelCard& model, const RouterConfig& config,
                                     WorkerRegistry* registry, RouterMetrics* metrics,
                                     GrammarCompiler* grammars)
    : model_(model),
      config_(config),
      registry_(registry),
      metrics_(metrics),
      validator_(model, config, grammars, metrics != nullptr ? &metrics->structured() : nullptr),
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

// The caller of a gRPC call: its peer's host and its authorization
// metadata.
Caller CallerOf(const grpc::CallbackServerContext& context) {
  Caller caller{.api = Api::kGrpc, .host = PeerHost(context.peer()), .authorization = {}};
  auto it = context.client_metadata().find("authorization");
  if (it != context.client_metadata().end()) {
    caller.authorization.emplace(it->second.data(), it->second.size());
  }
  return caller;
}

// LocalGeneration's call: the front's hold on its GenerateCall.
class LocalCall final : public LocalGeneration::Call {
 public:
  explicit LocalCall(GenerateCall::Ref call) : call_(std::move(call)) {}
  void Start(const v1::GenerateRequest& request) override { call_->Start(request); }
  void Cancel() override { call_->OnClientCancel(); }
  void WriteDone(bool ok) override { call_->OnWriteDone(ok); }

 private:
  GenerateCall::Ref call_;
};

}  // namespace

absl::StatusOr<std::string> GenerationService::Identify(const Caller& caller) const {
  if (!auth_.has_value()) return caller.host;
  absl::StatusOr<std::string> who =
      caller.authorization.has_value()
          ? auth_->CheckHeader(*caller.authorization)
          : absl::UnauthenticatedError("missing 'authorization: Bearer <token>' metadata");
  if (!who.ok())
    LOG(WARNING) << "unauthenticated call from " << caller.host << ": " << who.status();
  return who;
}

absl::Status GenerationService::Acquire(const std::string& who) {
  if (!clients_.TryAcquire(who)) {
    LOG(WARNING) << "rejecting a request of " << who << ": " << config_.max_streams_per_client
                 << " streams already open";
    return absl::ResourceExhaustedError(
        absl::StrCat("this client already has ", config_.max_streams_per_client,
                     " streams open (--max_streams_per_client); retry later"));
  }
  absl::Status admitted = TryAdmit();
  if (!admitted.ok()) {
    clients_.Release(who);
    LOG(WARNING) << "rejecting a request: " << admitted.message();
  }
  return admitted;
}

GenerateCall::Ref GenerationService::NewCall(const Caller& caller, const std::string& who,
                                             GenerateClient* client, absl::Time client_deadline) {
  // The call gives its client's slot back when it is destroyed.
  GenerateCall::Env env = env_;
  env.api = caller.api;
  env.on_destroyed = [this, who] {
    clients_.Release(who);
    OnCallDestroyed();
  };
  return GenerateCall::Create(env, client, client_deadline);
}

void GenerationService::CountRefused(const absl::Status& status, Api api) const {
  if (metrics_ != nullptr) metrics_->CountRequest(ToGrpcStatus(status).error_code(), api);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* GenerationService::Generate(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* body) {
  const Caller caller = CallerOf(*context);
  v1::GenerateRequest request;
  absl::StatusOr<std::string> who = Identify(caller);
  absl::Status status = who.status();
  if (status.ok()) status = ParseRawRequest(*body, context->peer(), &request);
  if (status.ok()) status = Acquire(*who);
  if (!status.ok()) {
    CountRefused(status, caller.api);
    return new RejectedStream(ToGrpcStatus(status));
  }
  auto* stream = new GrpcGenerateStream();
  GenerateCall::Ref call = NewCall(caller, *who, stream, absl::FromChrono(context->deadline()));
  GenerateCall* started = call.operator->();
  stream->Bind(std::move(call));
  started->Start(request);  // the stream's Ref keeps it alive
  return stream;
}

absl::StatusOr<std::shared_ptr<LocalGeneration::Call>> GenerationService::Open(
    const Caller& caller, GenerateClient* client) {
  absl::StatusOr<std::string> who = Identify(caller);
  absl::Status status = who.status();
  if (status.ok()) status = Acquire(*who);
  if (!status.ok()) {
    CountRefused(status, caller.api);
    return status;
  }
  // A front's client has no deadline of its own: --request_timeout_ms, if
  // set, caps it.
  return std::make_shared<LocalCall>(NewCall(caller, *who, client, absl::InfiniteFuture()));
}

absl::StatusOr<v1::ModelInfo> GenerationService::ModelInfo(const Caller& caller) {
  if (absl::StatusOr<std::string> who = Identify(caller); !who.ok()) return who.status();
  return DescribeModel();
}

absl::Status GenerationService::Accept(const grpc::CallbackServerContext& context,
                                       const grpc::ByteBuffer& body,
                                       google::protobuf::Message* request) const {
  if (absl::StatusOr<std::string> who = Identify(CallerOf(context)); !who.ok()) {
    return who.status();
  }
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

absl::Status GenerationService::TryAdmit() {
  absl::MutexLock lock(&mu_);
  if (!admitting_) return absl::UnavailableError("the router is shutting down; retry elsewhere");
  if (in_flight_ >= config_.max_queue) {
    return absl::ResourceExhaustedError(
        absl::StrCat("router is at capacity (", config_.max_queue,
                     " requests in flight, --max_queue); retry later"));
  }
  ++in_flight_;
  return absl::OkStatus();
}

void GenerationService::StopAdmitting() {
  absl::MutexLock lock(&mu_);
  admitting_ = false;
}

void GenerationService::OnCallDestroyed() {
  absl::MutexLock lock(&mu_);
  --in_flight_;
}

void GenerationService::WaitForCalls(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithDeadline(absl::Condition(
                            +[](int* n) { return *n == 0; }, &in_flight_),
                        deadline);
}

int GenerationService::calls_in_flight() const {
  absl::MutexLock lock(&mu_);
  return in_flight_;
}

}  // namespace pdserve::router
