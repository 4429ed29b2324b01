#include "tools/sse_stream.h"

#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace pdserve {
namespace {

// Far above any real header block; a peer that sends more is not HTTP.
constexpr size_t kMaxHeaderBytes = 64 * 1024;

}  // namespace

absl::Status SseStream::Feed(absl::string_view bytes, std::vector<std::string>* events) {
  in_.append(bytes.data(), bytes.size());
  if (state_ == State::kHeaders) {
    const size_t end = in_.find("\r\n\r\n");
    if (end == std::string::npos) {
      if (in_.size() > kMaxHeaderBytes) return absl::DataLossError("HTTP headers too long");
      return absl::OkStatus();
    }
    const std::string head = in_.substr(0, end);
    in_.erase(0, end + 4);
    if (absl::Status s = ParseHeaders(head); !s.ok()) return s;
  }
  if (state_ == State::kBody) {
    TakeBody(in_, events);
    in_.clear();
    return absl::OkStatus();
  }
  absl::Status s = ParseChunks();
  ParseEvents(events);
  return s;
}

absl::Status SseStream::ParseHeaders(absl::string_view head) {
  std::vector<absl::string_view> lines = absl::StrSplit(head, "\r\n");
  // "HTTP/1.1 200 OK"
  std::vector<absl::string_view> status = absl::StrSplit(lines[0], absl::MaxSplits(' ', 2));
  if (status.size() < 2 || !absl::StartsWith(status[0], "HTTP/1.") ||
      !absl::SimpleAtoi(status[1], &http_status_)) {
    state_ = State::kDone;
    return absl::DataLossError(absl::StrCat("not an HTTP/1.x status line: '", lines[0], "'"));
  }
  state_ = State::kBody;
  for (size_t i = 1; i < lines.size(); ++i) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(lines[i], absl::MaxSplits(':', 1));
    if (absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(kv.first), "transfer-encoding") &&
        absl::StrContains(absl::AsciiStrToLower(kv.second), "chunked")) {
      state_ = State::kChunkSize;
    }
  }
  return absl::OkStatus();
}

absl::Status SseStream::ParseChunks() {
  while (true) {
    switch (state_) {
      case State::kChunkSize: {
        const size_t eol = in_.find("\r\n");
        if (eol == std::string::npos) return absl::OkStatus();
        absl::string_view line(in_.data(), eol);
        line = line.substr(0, line.find(';'));  // chunk extensions
        uint64_t size = 0;
        if (!absl::SimpleHexAtoi(absl::StripAsciiWhitespace(line), &size)) {
          state_ = State::kDone;
          return absl::DataLossError(absl::StrCat("bad chunk size line '", line, "'"));
        }
        in_.erase(0, eol + 2);
        chunk_left_ = size;
        state_ = size == 0 ? State::kDone : State::kChunkData;
        break;
      }
      case State::kChunkData: {
        const size_t n = std::min(chunk_left_, in_.size());
        if (n == 0) return absl::OkStatus();
        TakeBody(absl::string_view(in_.data(), n), nullptr);
        in_.erase(0, n);
        chunk_left_ -= n;
        if (chunk_left_ == 0) state_ = State::kChunkDataEnd;
        break;
      }
      case State::kChunkDataEnd:
        if (in_.size() < 2) return absl::OkStatus();
        if (in_.compare(0, 2, "\r\n") != 0) {
          state_ = State::kDone;
          return absl::DataLossError("chunk not followed by CRLF");
        }
        in_.erase(0, 2);
        state_ = State::kChunkSize;
        break;
      default:
        return absl::OkStatus();
    }
  }
}

void SseStream::TakeBody(absl::string_view bytes, std::vector<std::string>* events) {
  // Carriage returns carry no meaning inside events (JSON escapes them), so
  // dropping them turns CRLF and LF streams into one form.
  for (char c : bytes) {
    if (c != '\r') body_.push_back(c);
  }
  if (events != nullptr) ParseEvents(events);
}

void SseStream::ParseEvents(std::vector<std::string>* events) {
  while (true) {
    const size_t end = body_.find("\n\n", event_start_);
    if (end == std::string::npos) return;
    std::string data;
    bool has_data = false;
    for (absl::string_view line :
         absl::StrSplit(absl::string_view(body_).substr(event_start_, end - event_start_), '\n')) {
      if (!absl::StartsWith(line, "data:")) continue;  // comments, other fields
      line.remove_prefix(5);
      if (absl::StartsWith(line, " ")) line.remove_prefix(1);
      if (has_data) data.push_back('\n');
      data.append(line.data(), line.size());
      has_data = true;
    }
    if (has_data) events->push_back(std::move(data));
    event_start_ = end + 2;
  }
}

}  // namespace pdserve
