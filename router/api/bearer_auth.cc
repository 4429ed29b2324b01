#include "router/api/bearer_auth.h"

#include <algorithm>
#include <fstream>
#include <memory>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"

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

absl::StatusOr<std::vector<std::string>> ReadTokens(const std::string& path) {
  std::ifstream f(path);
  if (!f) return absl::InvalidArgumentError(absl::StrCat("cannot read token file ", path));
  std::vector<std::string> tokens;
  for (std::string line; std::getline(f, line);) {
    const absl::string_view t = absl::StripAsciiWhitespace(line);
    if (t.empty() || absl::StartsWith(t, "#")) continue;
    tokens.emplace_back(t);
  }
  if (tokens.empty()) return absl::InvalidArgumentError(absl::StrCat("no token in ", path));
  return tokens;
}

}  // namespace

absl::StatusOr<BearerAuth> BearerAuth::Load(const std::string& path,
                                            absl::Duration reload_interval) {
  absl::StatusOr<std::vector<std::string>> tokens = ReadTokens(path);
  if (!tokens.ok()) return tokens.status();
  BearerAuth auth(std::move(*tokens));
  auth.state_->path = path;
  auth.state_->reload_interval = reload_interval;
  absl::MutexLock lock(&auth.state_->mu);
  auth.state_->next_check = absl::Now() + reload_interval;
  return auth;
}

BearerAuth::BearerAuth(std::vector<std::string> tokens) : state_(std::make_shared<State>()) {
  absl::MutexLock lock(&state_->mu);
  state_->tokens = std::make_shared<const std::vector<std::string>>(std::move(tokens));
}

BearerAuth::TokenList BearerAuth::Tokens() const {
  State& s = *state_;
  absl::MutexLock lock(&s.mu);
  const absl::Time now = absl::Now();
  if (s.path.empty() || now < s.next_check) return s.tokens;
  s.next_check = now + s.reload_interval;
  absl::StatusOr<std::vector<std::string>> fresh = ReadTokens(s.path);
  if (!fresh.ok()) {
    if (fresh.status().ToString() != s.last_error) {
      s.last_error = fresh.status().ToString();
      LOG(WARNING) << "keeping the previous bearer tokens: " << fresh.status();
    }
    return s.tokens;
  }
  s.last_error.clear();
  if (*fresh != *s.tokens) {
    LOG(INFO) << "bearer tokens reloaded from " << s.path << ": " << fresh->size() << " tokens";
    s.tokens = std::make_shared<const std::vector<std::string>>(std::move(*fresh));
  }
  return s.tokens;
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
  const TokenList tokens = Tokens();
  int match = -1;
  for (size_t i = 0; i < tokens->size(); ++i) {
    // Every token is compared, matched or not, for the same reason.
    if (ConstantTimeEquals(token, (*tokens)[i]) && match < 0) match = static_cast<int>(i);
  }
  if (match < 0) return absl::UnauthenticatedError("invalid bearer token");
  return absl::StrCat("token-", match + 1);
}

}  // namespace pdserve::router
