#include "router/bearer_auth.h"

#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace pdserve::router {
namespace {

// Compares without an early exit, so the time taken says nothing about how
// much of a guess was right.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? a[i] : 0, y = i < b.size() ? b[i] : 0;
    diff |= x ^ y;
  }
  return diff == 0;
}

}  // namespace

absl::StatusOr<BearerAuth> BearerAuth::Load(const std::string& path) {
  std::ifstream f(path);
  if (!f) return absl::InvalidArgumentError(absl::StrCat("cannot read token file ", path));
  std::vector<std::string> tokens;
  for (std::string line; std::getline(f, line);) {
    const absl::string_view t = absl::StripAsciiWhitespace(line);
    if (t.empty() || absl::StartsWith(t, "#")) continue;
    tokens.emplace_back(t);
  }
  if (tokens.empty()) return absl::InvalidArgumentError(absl::StrCat("no token in ", path));
  return BearerAuth(std::move(tokens));
}

absl::StatusOr<std::string> BearerAuth::Check(const grpc::ServerContextBase& context) const {
  const auto& md = context.client_metadata();
  const auto it = md.find("authorization");
  if (it == md.end()) {
    return absl::UnauthenticatedError("missing 'authorization: Bearer <token>' metadata");
  }
  return CheckHeader(absl::string_view(it->second.data(), it->second.size()));
}

absl::StatusOr<std::string> BearerAuth::CheckHeader(absl::string_view header) const {
  constexpr absl::string_view kScheme = "bearer ";
  if (header.size() <= kScheme.size() ||
      !absl::EqualsIgnoreCase(header.substr(0, kScheme.size()), kScheme)) {
    return absl::UnauthenticatedError("authorization metadata is not 'Bearer <token>'");
  }
  const absl::string_view token = absl::StripAsciiWhitespace(header.substr(kScheme.size()));
  int match = -1;
  for (size_t i = 0; i < tokens_.size(); ++i) {
    // Every token is compared, matched or not, for the same reason.
    if (ConstantTimeEquals(token, tokens_[i]) && match < 0) match = static_cast<int>(i);
  }
  if (match < 0) return absl::UnauthenticatedError("invalid bearer token");
  return absl::StrCat("token-", match + 1);
}

}  // namespace pdserve::router
