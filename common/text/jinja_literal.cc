#include "common/text/jinja_literal.h"

namespace pdserve {

std::optional<std::string> ReadJinjaString(std::string_view t, size_t open) {
  const char quote = t[open];
  std::string value;
  for (size_t i = open + 1; i < t.size(); ++i) {
    const char c = t[i];
    if (c == quote) return value;
    if (c != '\\' || i + 1 == t.size()) {
      value += c;
      continue;
    }
    const char e = t[++i];
    value += e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;  // \\ \' \" stay literal
  }
  return std::nullopt;
}

std::optional<std::string> ReadJinjaStringEndingAt(std::string_view t, size_t close) {
  if (close >= t.size() || (t[close] != '"' && t[close] != '\'')) return std::nullopt;
  const char quote = t[close];
  // The nearest unescaped quote of the same kind before it opens it (a
  // chat template's literals hold no unescaped quotes of their own kind).
  for (size_t i = close; i-- > 0;) {
    if (t[i] != quote) continue;
    size_t backslashes = 0;
    while (backslashes < i && t[i - 1 - backslashes] == '\\') ++backslashes;
    if (backslashes % 2 == 1) continue;
    return ReadJinjaString(t, i);
  }
  return std::nullopt;
}

}  // namespace pdserve
