// libFuzzer target for the router's edge: any bytes, parsed as a
// GenerateRequest, must be accepted with a prompt inside the model's
// vocabulary and context and settings inside their limits, or refused with
// INVALID_ARGUMENT / OUT_OF_RANGE — never crash, hang or pass something a
// worker would choke on. The model is a small random GGUF (byte-level BPE
// vocabulary) written once per process.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "common/model/model.h"
#include "google/protobuf/stubs/logging.h"
#include "router/call/request_validator.h"
#include "router/config/router_config.h"
#include "tests/fuzz/fuzz_model.h"

namespace {

struct Fixture {
  Fixture() : model(pdserve::fuzz::LoadFuzzModel()) {
    config.max_prompt_tokens = 200;
    config.max_tokens_limit = 128;
    validator = std::make_unique<pdserve::router::RequestValidator>(*model, config);
  }
  std::unique_ptr<pdserve::ModelCard> model;
  pdserve::router::RouterConfig config;
  std::unique_ptr<pdserve::router::RequestValidator> validator;
};

void CheckAccepted(const Fixture& f, const pdserve::router::ValidatedRequest& r) {
  const int vocab = f.model->tokenizer().vocab_size();
  if (r.prompt_tokens.empty()) __builtin_trap();
  if (static_cast<int>(r.prompt_tokens.size()) > f.config.max_prompt_tokens) __builtin_trap();
  for (int32_t id : r.prompt_tokens) {
    if (id < 0 || id >= vocab) __builtin_trap();
  }
  if (r.max_tokens < 1 || r.max_tokens > f.config.max_tokens_limit) __builtin_trap();
  if (static_cast<int>(r.prompt_tokens.size()) + r.max_tokens > f.model->config().context_length) {
    __builtin_trap();
  }
  if (static_cast<int>(r.stop.size()) > f.config.max_stop_strings) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Fixture* const fixture = [] {
    // protobuf logs every non-UTF-8 string it refuses; here that is the point.
    google::protobuf::SetLogHandler(nullptr);
    return new Fixture();
  }();
  pdserve::v1::GenerateRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  absl::StatusOr<pdserve::router::ValidatedRequest> r = fixture->validator->Validate(request);
  if (r.ok()) {
    CheckAccepted(*fixture, *r);
  } else if (r.status().code() != absl::StatusCode::kInvalidArgument &&
             r.status().code() != absl::StatusCode::kOutOfRange) {
    __builtin_trap();  // the edge answers only these two
  }
  return 0;
}
