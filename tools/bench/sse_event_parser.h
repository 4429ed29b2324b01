// SseEventParser: splits a text/event-stream body (server-sent events, as
// OpenAI-compatible servers answer `"stream": true`) into the `data` of its
// events, incrementally: feed body bytes as they arrive and each event comes
// out as soon as its terminating blank line is in, so a caller can
// timestamp it. CRLF or LF line ends, multi-line `data:` fields, `:`
// comments and other fields (ignored). The HTTP layer under it (status,
// chunked framing) is Beast's (openai_target.cc).
//
// Thread-safety: none; one parser per response.
#ifndef PDSERVE_TOOLS_BENCH_SSE_EVENT_PARSER_H_
#define PDSERVE_TOOLS_BENCH_SSE_EVENT_PARSER_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace pdserve {

class SseEventParser {
 public:
  // Appends the `data` of each event completed by `bytes` to `events`.
  void Feed(absl::string_view bytes, std::vector<std::string>* events);

  // The body so far, carriage returns dropped: an error response's JSON.
  const std::string& body() const { return body_; }

 private:
  std::string body_;
  size_t event_start_ = 0;  // first byte of the event being read
};

}  // namespace pdserve

#endif  // PDSERVE_TOOLS_BENCH_SSE_EVENT_PARSER_H_
