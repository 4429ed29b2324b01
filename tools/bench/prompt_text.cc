#include "tools/bench/prompt_text.h"

#include "common/base/status_macros.h"
#include "common/gguf/gguf_file.h"
#include "common/text/utf8.h"

namespace pdserve {
namespace {

// Random ids include byte tokens that decode to fragments of characters;
// APIs take UTF-8 text (a proto3 string that is not UTF-8 does not even
// parse), so fragments are dropped.
std::string WellFormed(const std::string& bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t pos = 0; pos < bytes.size();) {
    const Utf8Char c = DecodeUtf8(bytes, pos);
    if (c.status == Utf8Status::kOk) out.append(bytes, pos, c.length);
    pos += c.length;
  }
  return out;
}

}  // namespace

absl::StatusOr<PromptText> PromptText::FromModel(const std::string& model_path) {
  ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> gguf, GgufFile::Open(model_path));
  ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tokenizer, Tokenizer::FromGguf(*gguf));
  return PromptText(std::shared_ptr<const Tokenizer>(std::move(tokenizer)));
}

std::string PromptText::Render(const std::vector<int32_t>& ids,
                               std::vector<int32_t>* encoded) const {
  std::string text = WellFormed(tokenizer_->Decode(ids));
  *encoded = tokenizer_->Encode(text, /*parse_special=*/false);
  if (encoded->size() > ids.size()) {
    // Cut at a token boundary of the text's own encoding, then encode what
    // is left: a prefix of a canonical encoding almost always re-encodes to
    // itself, and the count reported is the real one either way.
    encoded->resize(ids.size());
    text = WellFormed(tokenizer_->Decode(*encoded));
    *encoded = tokenizer_->Encode(text, /*parse_special=*/false);
  }
  return text;
}

}  // namespace pdserve
