// libFuzzer target for the OpenAI-compatible HTTP API's edge: any bytes,
// read as an HTTP/1.1 request the way the server reads one (Beast's parser
// under the server's header and body caps) and, when it is a chat or
// completions call, its body parsed as an OpenAI request and the result
// handed to the router's RequestValidator — the same validator gRPC uses.
// The first byte picks the entry: odd = raw HTTP bytes, even = the rest is
// a JSON body for the endpoint its second bit names (so JSON mutations are
// not wasted on HTTP framing). Every input must be refused with
// INVALID_ARGUMENT (and a param that is a field path) / OUT_OF_RANGE or
// accepted with sane fields — never crash, hang or leak.
#include <unistd.h>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "common/model/model.h"
#include "google/protobuf/stubs/logging.h"
#include "router/api/openai/openai_error.h"
#include "router/api/openai/openai_request.h"
#include "router/call/request_validator.h"
#include "router/config/router_config.h"
#include "tests/fuzz/fuzz_model.h"

namespace {

namespace http = boost::beast::http;
using pdserve::router::openai::Endpoint;

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

void CheckBody(const Fixture& f, Endpoint endpoint, const std::string& body) {
  absl::StatusOr<pdserve::router::openai::OpenAiRequest> r =
      pdserve::router::openai::ParseOpenAiRequest(endpoint, body);
  if (!r.ok()) {
    if (r.status().code() != absl::StatusCode::kInvalidArgument) __builtin_trap();
    const pdserve::router::openai::OpenAiError e =
        pdserve::router::openai::FromParseStatus(r.status());
    if (e.http_status != 400 || e.message.empty() || e.Body().empty()) __builtin_trap();
    return;
  }
  if (r->logprobs < -1 || r->logprobs > pdserve::router::openai::kMaxTopLogprobs) __builtin_trap();
  if (r->include_usage && !r->stream) __builtin_trap();
  absl::StatusOr<pdserve::router::ValidatedRequest> v = f.validator->Validate(r->generate);
  if (v.ok()) {
    if (v->prompt_tokens.empty()) __builtin_trap();
    if (v->max_tokens < 1 || v->max_tokens > f.config.max_tokens_limit) __builtin_trap();
  } else if (v.status().code() != absl::StatusCode::kInvalidArgument &&
             v.status().code() != absl::StatusCode::kOutOfRange) {
    __builtin_trap();
  }
}

// As HttpConnection reads a request.
void CheckHttp(const Fixture& f, const uint8_t* data, size_t size) {
  http::request_parser<http::string_body> parser;
  parser.header_limit(16 * 1024);
  parser.body_limit(64 * 1024);
  parser.eager(true);
  boost::beast::error_code ec;
  size_t used = 0;
  while (used < size && !parser.is_done()) {
    const size_t n = parser.put(boost::asio::buffer(data + used, size - used), ec);
    if (ec || n == 0) break;
    used += n;
  }
  if (!parser.is_done()) return;
  const auto& message = parser.get();
  const auto target = message.target();
  if (message.method() != http::verb::post) return;
  if (target == "/v1/chat/completions") CheckBody(f, Endpoint::kChatCompletions, message.body());
  if (target == "/v1/completions") CheckBody(f, Endpoint::kCompletions, message.body());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Fixture* const fixture = [] {
    google::protobuf::SetLogHandler(nullptr);
    return new Fixture();
  }();
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  if (mode & 1) {
    CheckHttp(*fixture, data + 1, size - 1);
  } else {
    CheckBody(*fixture, (mode & 2) ? Endpoint::kCompletions : Endpoint::kChatCompletions,
              std::string(reinterpret_cast<const char*>(data + 1), size - 1));
  }
  return 0;
}
