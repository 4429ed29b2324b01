#include "common/http/http_request.h"

#include "absl/strings/match.h"

namespace pdserve {

std::optional<absl::string_view> HttpRequest::Header(absl::string_view name) const {
  for (const auto& [field, value] : headers) {
    if (absl::EqualsIgnoreCase(field, name)) return absl::string_view(value);
  }
  return std::nullopt;
}

absl::string_view HttpRequest::Path() const {
  const absl::string_view t = target;
  return t.substr(0, t.find('?'));
}

}  // namespace pdserve
