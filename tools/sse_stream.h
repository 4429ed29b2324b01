// SseStream: incremental parser of an HTTP/1.1 response that streams
// server-sent events (text/event-stream), as OpenAI-compatible servers
// answer `"stream": true`. Bytes are fed as they arrive; complete events
// come out as soon as their terminating blank line is in, so callers can
// timestamp each one. Handles a chunked or a length/close-delimited body,
// CRLF or LF line ends, multi-line `data:` fields and `:` comments.
//
// Thread-safety: none; one parser per connection.
#ifndef PDSERVE_TOOLS_SSE_STREAM_H_
#define PDSERVE_TOOLS_SSE_STREAM_H_

#include <cstddef>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"

namespace pdserve {

class SseStream {
 public:
  // Appends the `data` of each event completed by `bytes` to `events`.
  // An error means the response is malformed; the parser is then stuck.
  absl::Status Feed(absl::string_view bytes, std::vector<std::string>* events);

  bool headers_done() const { return state_ != State::kHeaders; }
  int http_status() const { return http_status_; }
  // The body so far (without chunk framing); useful for error responses,
  // which are JSON, not events.
  const std::string& body() const { return body_; }
  // The chunked body's last chunk arrived (a close-delimited body ends
  // with the connection instead).
  bool finished() const { return state_ == State::kDone; }

 private:
  enum class State { kHeaders, kChunkSize, kChunkData, kChunkDataEnd, kBody, kDone };

  absl::Status ParseHeaders(absl::string_view head);
  absl::Status ParseChunks();
  void TakeBody(absl::string_view bytes, std::vector<std::string>* events);
  void ParseEvents(std::vector<std::string>* events);

  State state_ = State::kHeaders;
  std::string in_;    // raw bytes not yet consumed
  std::string body_;  // de-chunked body, kept whole for error messages
  size_t event_start_ = 0;  // first body byte of the event being read
  size_t chunk_left_ = 0;
  int http_status_ = 0;
};

}  // namespace pdserve

#endif  // PDSERVE_TOOLS_SSE_STREAM_H_
