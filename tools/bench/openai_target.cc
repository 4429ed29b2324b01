#include "tools/bench/openai_target.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/base/host_port.h"
#include "tools/bench/sse_event_parser.h"

namespace pdserve {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using Clock = BenchClock;

// Runs one asynchronous operation of `io` to completion: the stream's
// expiry (the request's deadline) bounds each, which Beast's synchronous
// calls cannot do.
template <typename Start>
beast::error_code RunOp(asio::io_context& io, Start start) {
  beast::error_code result = asio::error::would_block;
  start([&result](beast::error_code ec, auto&&...) { result = ec; });
  io.restart();
  io.run();
  return result;
}

absl::Status Failed(absl::string_view what, const beast::error_code& ec) {
  if (ec == beast::error::timeout) return absl::DeadlineExceededError("deadline exceeded");
  return absl::UnavailableError(absl::StrCat(what, ": ", ec.message()));
}

absl::StatusCode CodeForHttp(int status) {
  switch (status) {
    case 400: case 422: return absl::StatusCode::kInvalidArgument;
    case 401: return absl::StatusCode::kUnauthenticated;
    case 403: return absl::StatusCode::kPermissionDenied;
    case 404: return absl::StatusCode::kNotFound;
    case 429: return absl::StatusCode::kResourceExhausted;
    case 503: return absl::StatusCode::kUnavailable;
    case 504: return absl::StatusCode::kDeadlineExceeded;
    default: return absl::StatusCode::kInternal;
  }
}

// The string at `key` of a peer's object, or "" (json::value() would throw
// on another type).
std::string StringField(const nlohmann::json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// {"error": {"message", "type", ...}}: the status its type stands for.
absl::Status ErrorEventStatus(const nlohmann::json& error) {
  const std::string type = StringField(error, "type");
  std::string message = StringField(error, "message");
  if (message.empty()) message = "error event without a message";
  absl::StatusCode code = absl::StatusCode::kUnavailable;
  if (type == "rate_limit_error") code = absl::StatusCode::kResourceExhausted;
  if (type == "invalid_request_error") code = absl::StatusCode::kInvalidArgument;
  if (type == "authentication_error") code = absl::StatusCode::kUnauthenticated;
  if (type == "timeout_error") code = absl::StatusCode::kDeadlineExceeded;
  if (type == "server_error" || type == "api_error") code = absl::StatusCode::kInternal;
  return absl::Status(code, absl::StrCat("error event (", type, "): ", message));
}

// Folds the events of one stream into a record as they arrive.
class EventSink {
 public:
  EventSink(RequestRecord* record, Clock::time_point sent) : record_(record), sent_(sent) {}

  // False once the stream said it is over.
  bool Take(const std::string& data, Clock::time_point now) {
    if (data == "[DONE]") {
      done_ = true;
      return false;
    }
    const nlohmann::json event = nlohmann::json::parse(data, nullptr, /*allow_exceptions=*/false);
    if (!event.is_object()) return true;
    if (event.contains("error") && event["error"].is_object()) {
      // A failure after the 200 head: OpenAI-compatible servers (pdserve,
      // vLLM) can only report it as an event.
      error_ = ErrorEventStatus(event["error"]);
      return false;
    }
    TakeUsage(event);
    if (!event.contains("choices") || !event["choices"].is_array() || event["choices"].empty()) {
      return true;
    }
    const nlohmann::json& choice = event["choices"][0];
    // A completion's "text", a chat completion's "delta.content".
    const nlohmann::json* text = nullptr;
    if (choice.contains("text")) {
      text = &choice["text"];
    } else if (choice.contains("delta") && choice["delta"].is_object() &&
               choice["delta"].contains("content")) {
      text = &choice["delta"]["content"];
    }
    if (text != nullptr && text->is_string() && !text->get<std::string>().empty()) {
      record_->chunks.push_back({MsBetween(sent_, now), 1});
    }
    if (choice.contains("finish_reason") && choice["finish_reason"].is_string()) {
      finish_reason_ = choice["finish_reason"].get<std::string>();
    }
    return true;
  }

  // The server's usage count, where it sent one, else a "length" finish
  // (exactly max_tokens tokens), says how many tokens the stream carried;
  // credit any the server merged into one event to its last one.
  void Finish() {
    if (record_->chunks.empty()) return;
    int want = completion_tokens_;
    if (want == 0 && finish_reason_ == "length") want = record_->requested_output_tokens;
    int seen = 0;
    for (const ChunkArrival& c : record_->chunks) seen += c.tokens;
    if (seen < want) record_->chunks.back().tokens += want - seen;
  }

  bool complete() const { return done_ || !finish_reason_.empty(); }
  const absl::Status& error() const { return error_; }

 private:
  // stream_options.include_usage: the last event before [DONE] counts the
  // prompt (as the server's template rendered it) and the output.
  void TakeUsage(const nlohmann::json& event) {
    if (!event.contains("usage") || !event["usage"].is_object()) return;
    const nlohmann::json& usage = event["usage"];
    if (usage.contains("completion_tokens") && usage["completion_tokens"].is_number_integer()) {
      completion_tokens_ = usage["completion_tokens"].get<int>();
    }
    if (record_->input_tokens == 0 && usage.contains("prompt_tokens") &&
        usage["prompt_tokens"].is_number_integer()) {
      record_->input_tokens = usage["prompt_tokens"].get<int>();
    }
  }

  RequestRecord* const record_;
  const Clock::time_point sent_;
  std::string finish_reason_;
  int completion_tokens_ = 0;
  bool done_ = false;
  absl::Status error_;
};

// Reads the response as it arrives: Beast parses the status line and the
// (chunked or length- or close-delimited) body, SseEventParser the events.
absl::Status ReadStream(asio::io_context& io, beast::tcp_stream& stream, Clock::time_point sent,
                        RequestRecord* record) {
  beast::flat_buffer buffer;
  http::response_parser<http::buffer_body> parser;
  // A finite limit: Boost 1.74 compares a Content-Length against an unset
  // (boost::none) limit as if it were exceeded.
  parser.body_limit(std::uint64_t{1} << 40);
  if (beast::error_code ec = RunOp(io, [&](auto done) {
        http::async_read_header(stream, buffer, parser, std::move(done));
      });
      ec) {
    return Failed("read response header", ec);
  }
  const int status = parser.get().result_int();
  SseEventParser events_parser;
  EventSink sink(record, sent);
  std::vector<std::string> events;
  bool open = true;
  char chunk[16384];
  while (!parser.is_done() && open) {
    parser.get().body().data = chunk;
    parser.get().body().size = sizeof(chunk);
    beast::error_code ec = RunOp(io, [&](auto done) {
      http::async_read_some(stream, buffer, parser, std::move(done));
    });
    if (ec == http::error::need_buffer) ec = {};
    const Clock::time_point now = Clock::now();
    const size_t n = sizeof(chunk) - parser.get().body().size;
    events.clear();
    events_parser.Feed(absl::string_view(chunk, n), &events);
    if (status == 200) {
      for (const std::string& e : events) open = open && sink.Take(e, now);
    }
    if (ec == http::error::end_of_stream || ec == http::error::partial_message) break;
    if (ec) return Failed("read response", ec);
  }
  if (status != 200) {
    return absl::Status(CodeForHttp(status), absl::StrCat("HTTP ", status, ": ",
                                                          events_parser.body().substr(0, 300)));
  }
  if (!sink.error().ok()) return sink.error();
  if (!sink.complete()) return absl::UnavailableError("stream ended before the completion did");
  sink.Finish();
  return absl::OkStatus();
}

}  // namespace

std::string OpenAiCompletionBody(const BenchRequestSpec& spec,
                                 const std::vector<int32_t>& ban_ids) {
  const v1::SamplingParams& s = spec.sampling;
  // Every knob is explicit: the server's defaults (top_k 40, top_p 0.95,
  // repeat penalty 1.1) differ from ours.
  nlohmann::json body = {
      {"max_tokens", spec.max_tokens},
      {"stream", true},
      {"temperature", s.has_temperature() ? s.temperature() : 0.0f},
      {"top_k", s.has_top_k() ? s.top_k() : 0},
      {"top_p", s.has_top_p() ? s.top_p() : 1.0f},
      {"min_p", s.has_min_p() ? s.min_p() : 0.0f},
      // llama.cpp's name and vLLM's (pdserve's) for the same knob.
      {"repeat_penalty", s.has_repetition_penalty() ? s.repetition_penalty() : 1.0f},
      {"repetition_penalty", s.has_repetition_penalty() ? s.repetition_penalty() : 1.0f},
      {"presence_penalty", s.presence_penalty()},
      {"frequency_penalty", s.frequency_penalty()},
      {"seed", s.seed()},
  };
  if (spec.messages.empty()) {
    body["prompt"] = spec.text;
  } else {
    nlohmann::json messages = nlohmann::json::array();
    for (const ChatMessage& m : spec.messages) {
      messages.push_back({{"role", m.role}, {"content", m.content}});
    }
    body["messages"] = std::move(messages);
    // The prompt's length is the server's template's to decide; its usage
    // event reports it (and the output's exact count).
    body["stream_options"] = {{"include_usage", true}};
  }
  if (spec.ignore_eos) body["ignore_eos"] = true;
  // For servers without ignore_eos (llama-cpp-python's): ban the
  // end-of-generation tokens instead.
  if (spec.ignore_eos && !ban_ids.empty()) {
    nlohmann::json bias = nlohmann::json::object();
    for (int32_t id : ban_ids) bias[std::to_string(id)] = -100.0;
    body["logit_bias"] = std::move(bias);
  }
  return body.dump();
}

absl::StatusOr<std::unique_ptr<OpenAiTarget>> OpenAiTarget::Create(
    const std::string& address, std::vector<int32_t> ban_ids) {
  absl::StatusOr<HostPort> hp = ParseHostPort(address);
  if (!hp.ok()) return hp.status();
  asio::io_context io;
  asio::ip::tcp::resolver resolver(io);
  beast::error_code ec;
  auto results = resolver.resolve(hp->host, std::to_string(hp->port), ec);
  if (ec || results.empty()) {
    return absl::UnavailableError(absl::StrCat("resolve ", address, ": ", ec.message()));
  }
  return std::unique_ptr<OpenAiTarget>(
      new OpenAiTarget(address, results.begin()->endpoint(), std::move(ban_ids)));
}

void OpenAiTarget::Start(const BenchRequestSpec& spec, RequestRecord record,
                         Clock::time_point bench_start, BenchDoneFn done) {
  absl::MutexLock lock(&mu_);
  threads_.emplace_back(&OpenAiTarget::Run, this, spec, std::move(record), bench_start,
                        std::move(done));
}

void OpenAiTarget::Quiesce() {
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    threads.swap(threads_);
  }
  for (std::thread& t : threads) t.join();
}

void OpenAiTarget::Run(BenchRequestSpec spec, RequestRecord record, Clock::time_point bench_start,
                       BenchDoneFn done) const {
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         absl::ToChronoNanoseconds(spec.timeout));
  Clock::time_point sent = Clock::now();
  absl::Status status = [&]() -> absl::Status {
    if (spec.text.empty() && spec.messages.empty()) {
      return absl::InvalidArgumentError("the openai target sends text: set a prompt tokenizer");
    }
    asio::io_context io;
    beast::tcp_stream stream(io);
    stream.expires_at(deadline);
    if (beast::error_code ec = RunOp(io, [&](auto done) {
          stream.async_connect(endpoint_, std::move(done));
        });
        ec) {
      return Failed(absl::StrCat("connect ", address_), ec);
    }
    http::request<http::string_body> request(
        http::verb::post, spec.messages.empty() ? "/v1/completions" : "/v1/chat/completions", 11);
    request.set(http::field::host, address_);
    request.set(http::field::content_type, "application/json");
    request.set(http::field::accept, "text/event-stream");
    request.body() = OpenAiCompletionBody(spec, ban_ids_);
    request.prepare_payload();
    sent = Clock::now();
    record.send_s = MsBetween(bench_start, sent) / 1000.0;
    if (beast::error_code ec = RunOp(io, [&](auto done) {
          http::async_write(stream, request, std::move(done));
        });
        ec) {
      return Failed("send request", ec);
    }
    return ReadStream(io, stream, sent, &record);
  }();
  const Clock::time_point end = Clock::now();
  record.e2e_ms = MsBetween(sent, end);
  record.code = status.code();
  if (!status.ok()) record.error = std::string(status.message());
  done(std::move(record), end);
}

}  // namespace pdserve
