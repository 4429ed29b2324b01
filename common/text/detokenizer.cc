#include "common/text/detokenizer.h"

#include <cstddef>
#include <string>
#include <string_view>

#include "common/text/utf8.h"

namespace pdserve {
namespace {

// Moves the valid UTF-8 prefix of `*bytes` into the result, replacing each
// ill-formed subpart by U+FFFD. A truncated sequence at the end is left in
// `*bytes` unless `final`, when it is replaced too.
std::string TakeValidPrefix(std::string* bytes, bool final) {
  std::string out;
  out.reserve(bytes->size());
  const std::string_view view(*bytes);
  size_t pos = 0;
  while (pos < view.size()) {
    const Utf8Char c = DecodeUtf8(view, pos);
    if (c.status == Utf8Status::kTruncated && !final) break;
    if (c.status == Utf8Status::kOk) {
      out.append(view.substr(pos, c.length));
    } else {
      out.append(kReplacementUtf8);
    }
    pos += c.length;
  }
  bytes->erase(0, pos);
  return out;
}

}  // namespace

std::string IncrementalDetokenizer::Push(int32_t id) {
  pending_ += tokenizer_.TokenBytes(id, render_special_);
  return TakeValidPrefix(&pending_, /*final=*/false);
}

std::string IncrementalDetokenizer::Flush() { return TakeValidPrefix(&pending_, /*final=*/true); }

}  // namespace pdserve
