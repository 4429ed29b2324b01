// HttpRequest: one parsed HTTP request as a handler sees it (method, target,
// headers, body), plus the peer for logs.
//
// Thread-safety: a plain value; no synchronisation of its own.
#ifndef PDSERVE_COMMON_HTTP_HTTP_REQUEST_H_
#define PDSERVE_COMMON_HTTP_HTTP_REQUEST_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace pdserve {

// Header fields in the order sent (names as sent; a name may repeat).
using HttpHeaderList = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;  // as sent: "GET", "POST", or any token
  std::string target;  // path and query, e.g. "/v1/models?x=1"
  int version = 11;    // 10 (HTTP/1.0) or 11 (HTTP/1.1)
  HttpHeaderList headers;
  std::string body;
  std::string peer;  // "ip:port" of the client

  // The value of the first header called `name`, compared without regard to
  // ASCII case as HTTP field names are; nullopt when absent.
  std::optional<absl::string_view> Header(absl::string_view name) const;
  // The target without its query ("/metrics?x=1" -> "/metrics").
  absl::string_view Path() const;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_HTTP_HTTP_REQUEST_H_
