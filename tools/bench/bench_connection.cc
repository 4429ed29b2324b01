#include "tools/bench/bench_connection.h"

#include <grpcpp/grpcpp.h>

#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/rpc/grpc_status.h"
#include "tools/bench/decode_target.h"
#include "tools/bench/generation_target.h"
#include "tools/bench/openai_target.h"

namespace pdserve {
namespace {

constexpr auto kInfoTimeout = std::chrono::seconds(10);

absl::Status Annotate(const absl::Status& s, absl::string_view what, const std::string& address) {
  return absl::Status(s.code(), absl::StrCat(what, " from ", address, ": ", s.message()));
}

absl::Status ConnectRouter(const std::string& address, const ClientSecurity& security,
                           BenchConnection* c) {
  c->router = v1::Generation::NewStub(
      grpc::CreateChannel(address, security.channel_credentials()));
  grpc::ClientContext ctx;
  security.Decorate(&ctx);
  ctx.set_deadline(std::chrono::system_clock::now() + kInfoTimeout);
  v1::ModelInfo info;
  absl::Status s = FromGrpcStatus(c->router->GetModelInfo(&ctx, v1::GetModelInfoRequest(), &info));
  if (!s.ok()) return Annotate(s, "GetModelInfo", address);
  c->model_name = info.name();
  c->vocab_size = info.vocab_size();
  c->context_length = info.context_length();
  c->target = std::make_unique<GenerationTarget>(c->router.get(), security.bearer_token);
  return absl::OkStatus();
}

absl::Status ConnectDecode(const std::string& address, const PromptText* tokenizer,
                           BenchConnection* c) {
  c->decode = v1::DecodeWorker::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + kInfoTimeout);
  v1::WorkerInfo info;
  absl::Status s = FromGrpcStatus(c->decode->GetInfo(&ctx, v1::GetInfoRequest(), &info));
  if (!s.ok()) return Annotate(s, "GetInfo", address);
  c->model_name = info.model_name();
  c->vocab_size = tokenizer->vocab_size();
  c->context_length = info.context_length();
  c->target = std::make_unique<DecodeTarget>(c->decode.get());
  return absl::OkStatus();
}

absl::Status ConnectOpenAi(const std::string& address, const PromptText* tokenizer,
                           bool ban_eos, BenchConnection* c) {
  ASSIGN_OR_RETURN(std::unique_ptr<OpenAiTarget> target,
                   OpenAiTarget::Create(address, ban_eos ? tokenizer->eog_ids()
                                                         : std::vector<int32_t>{}));
  c->model_name = absl::StrCat("(OpenAI-compatible server at ", address, ")");
  c->vocab_size = tokenizer->vocab_size();
  c->target = std::move(target);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<BenchTargetKind> ParseBenchTargetKind(absl::string_view name) {
  if (name == "router") return BenchTargetKind::kRouter;
  if (name == "decode") return BenchTargetKind::kDecode;
  if (name == "openai") return BenchTargetKind::kOpenAi;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown target '", name, "'; want router, decode or openai"));
}

absl::StatusOr<BenchConnection> ConnectBench(BenchTargetKind kind, const std::string& address,
                                             const PromptText* tokenizer,
                                             const ClientSecurity& security, bool openai_ban_eos) {
  BenchConnection c;
  if (kind != BenchTargetKind::kRouter && tokenizer == nullptr) {
    return absl::InvalidArgumentError("this target needs the model's tokenizer (--model)");
  }
  switch (kind) {
    case BenchTargetKind::kRouter:
      RETURN_IF_ERROR(ConnectRouter(address, security, &c));
      break;
    case BenchTargetKind::kDecode:
      RETURN_IF_ERROR(ConnectDecode(address, tokenizer, &c));
      break;
    case BenchTargetKind::kOpenAi:
      RETURN_IF_ERROR(ConnectOpenAi(address, tokenizer, openai_ban_eos, &c));
      break;
  }
  return c;
}

}  // namespace pdserve
