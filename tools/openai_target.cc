#include "tools/openai_target.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/base/host_port.h"
#include "tools/sse_stream.h"

namespace pdserve {
namespace {

using Clock = BenchClock;

absl::Status Errno(absl::string_view what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
}

// Owns one connected socket.
class Socket {
 public:
  explicit Socket(int fd) : fd_(fd) {}
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() {
    if (fd_ >= 0) close(fd_);
  }

  absl::Status SendAll(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Errno("send");
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return absl::OkStatus();
  }

  // Waits until `deadline` for bytes; "" means the peer closed.
  absl::StatusOr<std::string> Receive(Clock::time_point deadline) {
    pollfd p{fd_, POLLIN, 0};
    while (true) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return absl::DeadlineExceededError("deadline exceeded");
      const int r = poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1 << 30)));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return Errno("poll");
      if (r > 0) break;
    }
    char buf[16384];
    ssize_t n;
    do {
      n = recv(fd_, buf, sizeof(buf), 0);
    } while (n < 0 && errno == EINTR);
    if (n < 0) return Errno("recv");
    return std::string(buf, static_cast<size_t>(n));
  }

 private:
  const int fd_;
};

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
    if (!event.is_object() || !event.contains("choices") || event["choices"].empty()) return true;
    const nlohmann::json& choice = event["choices"][0];
    if (choice.contains("text") && choice["text"].is_string() &&
        !choice["text"].get<std::string>().empty()) {
      record_->chunks.push_back({MsBetween(sent_, now), 1});
    }
    if (choice.contains("finish_reason") && choice["finish_reason"].is_string()) {
      finish_reason_ = choice["finish_reason"].get<std::string>();
    }
    return true;
  }

  // A "length" finish generated exactly max_tokens tokens; credit any the
  // server sent merged into one event to its last one.
  void Finish() {
    if (finish_reason_ != "length" || record_->chunks.empty()) return;
    int seen = 0;
    for (const ChunkArrival& c : record_->chunks) seen += c.tokens;
    if (seen < record_->requested_output_tokens) {
      record_->chunks.back().tokens += record_->requested_output_tokens - seen;
    }
  }

  bool complete() const { return done_ || !finish_reason_.empty(); }

 private:
  RequestRecord* const record_;
  const Clock::time_point sent_;
  std::string finish_reason_;
  bool done_ = false;
};

std::string HttpRequest(const std::string& address, const std::string& body) {
  return absl::StrCat("POST /v1/completions HTTP/1.1\r\nHost: ", address,
                      "\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\n"
                      "Content-Length: ", body.size(), "\r\nConnection: close\r\n\r\n", body);
}

// Reads the response until the stream ends; fills the record's chunks.
absl::Status ReadStream(Socket& socket, Clock::time_point sent, Clock::time_point deadline,
                        RequestRecord* record) {
  SseStream stream;
  EventSink sink(record, sent);
  std::vector<std::string> events;
  bool open = true;
  while (open) {
    absl::StatusOr<std::string> bytes = socket.Receive(deadline);
    if (!bytes.ok()) return bytes.status();
    const Clock::time_point now = Clock::now();
    if (bytes->empty()) break;
    events.clear();
    if (absl::Status s = stream.Feed(*bytes, &events); !s.ok()) return s;
    if (stream.headers_done() && stream.http_status() != 200) continue;  // error body
    for (const std::string& e : events) open = open && sink.Take(e, now);
    if (stream.finished()) break;
  }
  if (stream.http_status() != 200) {
    return absl::Status(CodeForHttp(stream.http_status()),
                        absl::StrCat("HTTP ", stream.http_status(), ": ",
                                     stream.body().substr(0, 300)));
  }
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
      {"prompt", spec.text},
      {"max_tokens", spec.max_tokens},
      {"stream", true},
      {"temperature", s.has_temperature() ? s.temperature() : 0.0f},
      {"top_k", s.has_top_k() ? s.top_k() : 0},
      {"top_p", s.has_top_p() ? s.top_p() : 1.0f},
      {"min_p", s.has_min_p() ? s.min_p() : 0.0f},
      {"repeat_penalty", s.has_repetition_penalty() ? s.repetition_penalty() : 1.0f},
      {"presence_penalty", s.presence_penalty()},
      {"frequency_penalty", s.frequency_penalty()},
      {"seed", s.seed()},
  };
  if (spec.ignore_eos && !ban_ids.empty()) {
    nlohmann::json bias = nlohmann::json::object();
    for (int32_t id : ban_ids) bias[std::to_string(id)] = -100.0;
    body["logit_bias"] = std::move(bias);
  }
  return body.dump();
}

absl::StatusOr<std::unique_ptr<OpenAiTarget>> OpenAiTarget::Create(const std::string& address,
                                                                   std::vector<int32_t> ban_ids) {
  absl::StatusOr<HostPort> hp = ParseHostPort(address);
  if (!hp.ok()) return hp.status();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(hp->host.c_str(), std::to_string(hp->port).c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    return absl::UnavailableError(absl::StrCat("resolve ", address, ": ", gai_strerror(rc)));
  }
  sockaddr_storage addr{};
  std::memcpy(&addr, res->ai_addr, res->ai_addrlen);
  const socklen_t len = res->ai_addrlen;
  freeaddrinfo(res);
  return std::unique_ptr<OpenAiTarget>(new OpenAiTarget(address, addr, len, std::move(ban_ids)));
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
    if (spec.text.empty()) {
      return absl::InvalidArgumentError("the openai target sends text: set a prompt tokenizer");
    }
    const int fd = socket(addr_.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return Errno("socket");
    Socket socket(fd);
    if (connect(fd, reinterpret_cast<const sockaddr*>(&addr_), addr_len_) != 0) {
      return Errno(absl::StrCat("connect ", address_));
    }
    const std::string request = HttpRequest(address_, OpenAiCompletionBody(spec, ban_ids_));
    sent = Clock::now();
    record.send_s = MsBetween(bench_start, sent) / 1000.0;
    if (absl::Status s = socket.SendAll(request); !s.ok()) return s;
    return ReadStream(socket, sent, deadline, &record);
  }();
  const Clock::time_point end = Clock::now();
  record.e2e_ms = MsBetween(sent, end);
  record.code = status.code();
  if (!status.ok()) record.error = std::string(status.message());
  done(std::move(record), end);
}

}  // namespace pdserve
