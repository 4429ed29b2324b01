#include "tools/bench/bench_echo_server.h"

#include <chrono>

#include "absl/strings/str_cat.h"

namespace pdserve {
namespace {

constexpr int kDefaultMaxTokens = 128;  // as the router's default

// Writes one call's messages back to back; deletes itself in OnDone.
class EchoStream final : public grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  explicit EchoStream(const v1::GenerateRequest& request)
      : prompt_(request.tokens().ids().begin(), request.tokens().ids().end()),
        total_(request.max_tokens() > 0 ? request.max_tokens() : kDefaultMaxTokens) {
    if (prompt_.empty()) prompt_.push_back(100);
    WriteNext();
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "client went away"));
      return;
    }
    WriteNext();
  }

  void OnDone() override { delete this; }

 private:
  void WriteNext() {
    message_.Clear();
    if (step_ == 0) {
      message_.mutable_started()->set_prompt_tokens(static_cast<int32_t>(prompt_.size()));
    } else if (step_ <= total_) {
      v1::Chunk* c = message_.mutable_chunk();
      // A few bytes of text, so the message is as large as a real chunk.
      c->set_text(" tok");
      c->add_token_ids(prompt_[static_cast<size_t>(step_ - 1) % prompt_.size()]);
    } else if (step_ == total_ + 1) {
      v1::Finished* f = message_.mutable_finished();
      f->set_reason(v1::FINISH_REASON_LENGTH);
      f->mutable_usage()->set_prompt_tokens(static_cast<int32_t>(prompt_.size()));
      f->mutable_usage()->set_completion_tokens(total_);
    } else {
      Finish(grpc::Status::OK);
      return;
    }
    ++step_;
    StartWrite(&message_);
  }

  std::vector<int32_t> prompt_;
  const int total_;
  int step_ = 0;
  v1::GenerateResponse message_;
};

class EchoService final : public v1::Generation::CallbackService {
 public:
  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext* /*ctx*/, const v1::GenerateRequest* request) override {
    return new EchoStream(*request);
  }

  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* ctx,
                                         const v1::GetModelInfoRequest* /*request*/,
                                         v1::ModelInfo* info) override {
    info->set_name("echo");
    info->set_vocab_size(EchoGenerationServer::kVocabSize);
    info->set_context_length(EchoGenerationServer::kContextLength);
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<EchoGenerationServer>> EchoGenerationServer::Start() {
  auto out = std::unique_ptr<EchoGenerationServer>(new EchoGenerationServer());
  out->service_ = std::make_unique<EchoService>();
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &out->port_);
  builder.RegisterService(out->service_.get());
  out->server_ = builder.BuildAndStart();
  if (out->server_ == nullptr || out->port_ == 0) {
    return absl::UnavailableError("echo server: cannot listen on 127.0.0.1");
  }
  return out;
}

EchoGenerationServer::~EchoGenerationServer() {
  if (server_ == nullptr) return;
  server_->Shutdown(std::chrono::system_clock::now());
  server_->Wait();
}

std::string EchoGenerationServer::address() const { return absl::StrCat("127.0.0.1:", port_); }

}  // namespace pdserve
