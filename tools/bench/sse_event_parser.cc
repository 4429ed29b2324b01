#include "tools/bench/sse_event_parser.h"

#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"

namespace pdserve {

void SseEventParser::Feed(absl::string_view bytes, std::vector<std::string>* events) {
  // Carriage returns carry no meaning inside events (JSON escapes them), so
  // dropping them turns CRLF and LF streams into one form.
  for (char c : bytes) {
    if (c != '\r') body_.push_back(c);
  }
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
