#include "tools/cli/generate_client.h"

#include "common/rpc/grpc_status.h"

namespace pdserve {

GenerateClient::GenerateClient(const std::string& address, ClientSecurity security)
    : security_(std::move(security)),
      stub_(v1::Generation::NewStub(
          grpc::CreateChannel(address, security_.channel_credentials()))) {}

absl::StatusOr<GenerateResult> GenerateClient::Generate(
    const v1::GenerateRequest& request, absl::Duration timeout,
    const std::function<void(const std::string&)>& on_text) {
  grpc::ClientContext ctx;
  security_.Decorate(&ctx);
  ctx.set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout));
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader = stub_->Generate(&ctx, request);
  GenerateResult out;
  v1::GenerateResponse msg;
  while (reader->Read(&msg)) {
    if (msg.has_started()) out.started = msg.started();
    if (msg.has_chunk()) {
      out.text += msg.chunk().text();
      out.token_ids.insert(out.token_ids.end(), msg.chunk().token_ids().begin(),
                           msg.chunk().token_ids().end());
      if (on_text && !msg.chunk().text().empty()) on_text(msg.chunk().text());
    }
    if (msg.has_finished()) out.finished = msg.finished();
  }
  absl::Status s = FromGrpcStatus(reader->Finish());
  if (!s.ok()) return s;
  return out;
}

absl::Status GenerateClient::WaitReady(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Status last = absl::UnavailableError("router did not answer");
  while (absl::Now() < deadline) {
    grpc::ClientContext ctx;
    security_.Decorate(&ctx);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    v1::ModelInfo info;
    grpc::Status s = stub_->GetModelInfo(&ctx, v1::GetModelInfoRequest(), &info);
    if (s.ok()) return absl::OkStatus();
    last = FromGrpcStatus(s);
    absl::SleepFor(absl::Milliseconds(200));
  }
  return last;
}

}  // namespace pdserve
