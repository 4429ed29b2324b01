#include "common/model/model_card.h"

#include <algorithm>
#include <string_view>

#include "absl/strings/str_format.h"
#include "common/base/status_macros.h"

namespace pdserve {
namespace {

// FNV-1a, 64-bit: stable across processes and builds (absl::Hash is not).
class Fnv64 {
 public:
  void Add(const void* data, size_t n) {
    const uint8_t* p = static_cast<const uint8_t*>(data);
    for (size_t i = 0; i < n; ++i) h_ = (h_ ^ p[i]) * 0x100000001b3ull;
  }
  void AddString(std::string_view s) {
    Add(s.data(), s.size());
    Add("\0", 1);
  }
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = 0xcbf29ce484222325ull;
};

}  // namespace

std::string ComputeModelFingerprint(const GgufFile& gguf) {
  // Metadata keys plus every tensor's name/type/shape, and a few KiB from the
  // start, middle and end of each tensor: cheap (no full read of the file)
  // and different for any two real checkpoints or quantisations.
  Fnv64 h;
  for (const std::string& k : gguf.keys()) h.AddString(k);
  for (const GgufTensorInfo& t : gguf.tensors()) {
    h.AddString(t.name);
    h.Add(&t.type, sizeof t.type);
    h.Add(t.ne, sizeof t.ne);
    constexpr int64_t kSample = 1024;
    for (int64_t at : {int64_t{0}, t.nbytes / 2, t.nbytes - kSample}) {
      const int64_t begin = std::max<int64_t>(0, at);
      h.Add(t.data + begin, static_cast<size_t>(std::min(kSample, t.nbytes - begin)));
    }
  }
  return absl::StrFormat("%016x", h.value());
}

absl::StatusOr<std::unique_ptr<ModelCard>> ModelCard::Load(const std::string& path) {
  std::unique_ptr<ModelCard> c(new ModelCard);
  ASSIGN_OR_RETURN(c->gguf_, GgufFile::Open(path));
  ASSIGN_OR_RETURN(c->config_, ModelConfig::FromGguf(*c->gguf_));
  ASSIGN_OR_RETURN(c->tokenizer_, Tokenizer::FromGguf(*c->gguf_));
  ASSIGN_OR_RETURN(
      ChatTemplate tmpl,
      ChatTemplate::FromGguf(*c->gguf_, c->tokenizer_->TokenText(c->tokenizer_->eos_id())));
  c->chat_template_ = std::make_unique<ChatTemplate>(std::move(tmpl));
  c->fingerprint_ = ComputeModelFingerprint(*c->gguf_);
  return c;
}

}  // namespace pdserve
