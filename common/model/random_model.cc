#include "common/model/random_model.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/gguf/ggml_type.h"
#include "common/gguf/gguf_file.h"
#include "common/gguf/gguf_writer.h"
#include "common/quant/half.h"
#include "common/quant/kernels.h"
#include "common/quant/quantize_activations.h"

namespace pdserve {
namespace {

absl::StatusOr<std::string> RandomBlocks(uint32_t type, int64_t ne0, int64_t ne1, float scale,
                                         std::mt19937_64& rng);

using RowQuantizer = void (*)(const float*, void*, int64_t);

// The types this file can quantise real values into; nullptr for others.
RowQuantizer QuantizerFor(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kQ4_0:
      return QuantizeRowQ4_0;
    case GgmlType::kQ4_1:
      return QuantizeRowQ4_1;
    case GgmlType::kQ8_0:
      return QuantizeRowQ8_0;
    case GgmlType::kF16:
      return QuantizeRowF16;
    case GgmlType::kBF16:
      return QuantizeRowBf16;
    case GgmlType::kF32:
      return QuantizeRowF32;
    default:
      return nullptr;
  }
}

// Random N(0, scale) values in `type`'s format: quantised where a quantiser
// exists, else valid random blocks (RandomBlocks).
absl::StatusOr<std::string> RandomTensor(uint32_t type, int64_t ne0, int64_t ne1, float scale,
                                         std::mt19937_64& rng) {
  const RowQuantizer quantize = QuantizerFor(type);
  if (quantize == nullptr) return RandomBlocks(type, ne0, ne1, scale, rng);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> row(ne0);
  const int64_t row_bytes = GgmlRowBytes(type, ne0);
  if (row_bytes < 0) return absl::InvalidArgumentError("random model: bad type/shape");
  std::string out(static_cast<size_t>(row_bytes * ne1), '\0');
  for (int64_t r = 0; r < ne1; ++r) {
    for (float& v : row) v = dist(rng);
    quantize(row.data(), out.data() + r * row_bytes, ne0);
  }
  return out;
}

// Types without a quantiser here get random bytes with their f16 scale
// fields set so that elements come out roughly N(0, scale): valid blocks of
// the format, which is all a random model needs. `d_per_std` is the block
// scale per unit of element standard deviation (from the format's value
// distribution under uniform random bits), `dmin_per_d` sets the min that
// centres it.
struct RandomBlockFormat {
  GgmlType type;
  int d_offset;     // byte offset of the f16 scale in a block
  int dmin_offset;  // of the f16 min/dmin, or -1
  float d_per_std;
  float dmin_per_d;
};

constexpr RandomBlockFormat kRandomBlockFormats[] = {
    {GgmlType::kQ5_0, 0, -1, 1.0f / 9.2f, 0.0f},
    {GgmlType::kQ5_1, 0, 2, 1.0f / 9.2f, -15.5f},  // m = -15.5 d centres q in [0, 32)
    {GgmlType::kQ4_K, 0, 2, 1.0f / 263.0f, 7.5f},  // d*sc*q - dmin*m
    {GgmlType::kQ5_K, 0, 2, 1.0f / 537.0f, 15.5f},
    {GgmlType::kQ6_K, 208, -1, 1.0f / 1366.0f, 0.0f},  // d*sc*(q - 32)
};

absl::StatusOr<std::string> RandomBlocks(uint32_t type, int64_t ne0, int64_t ne1, float scale,
                                         std::mt19937_64& rng) {
  const RandomBlockFormat* f = nullptr;
  for (const RandomBlockFormat& candidate : kRandomBlockFormats) {
    if (static_cast<uint32_t>(candidate.type) == type) f = &candidate;
  }
  const GgmlTypeTraits* traits = FindGgmlTypeTraits(type);
  const int64_t row_bytes = GgmlRowBytes(type, ne0);
  if (f == nullptr || traits == nullptr || row_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("random model: cannot write type ", GgmlTypeName(type)));
  }
  std::string out(static_cast<size_t>(row_bytes * ne1), '\0');
  for (char& c : out) c = static_cast<char>(rng());
  const uint16_t d = F32ToF16(scale * f->d_per_std);
  const uint16_t dmin = F32ToF16(scale * f->d_per_std * f->dmin_per_d);
  for (size_t b = 0; b < out.size(); b += traits->block_bytes) {
    std::memcpy(&out[b + f->d_offset], &d, sizeof(d));
    if (f->dmin_offset >= 0) std::memcpy(&out[b + f->dmin_offset], &dmin, sizeof(dmin));
  }
  return out;
}

std::string OnesNorm(int64_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> dist(0.8f, 1.2f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return std::string(reinterpret_cast<const char*>(v.data()), n * sizeof(float));
}

// Byte-level vocabulary: 3 ChatML specials, the 256 byte symbols, then
// two-byte merges of common letters until n_vocab is reached.
void AddVocab(const RandomModelSpec& s, GgufWriter& w) {
  std::vector<std::string> tokens = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  std::vector<int32_t> types = {3, 3, 3};
  int shifted = 0;
  for (int b = 0; b < 256; ++b) {
    // GPT-2 byte-to-unicode: printable bytes map to themselves, others to U+0100+.
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    const char32_t cp = printable ? static_cast<char32_t>(b) : 0x100 + shifted++;
    std::string utf8;
    if (cp < 0x80) {
      utf8 = std::string(1, static_cast<char>(cp));
    } else {
      utf8 = {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
    }
    tokens.push_back(utf8);
    types.push_back(1);
  }
  std::vector<std::string> merges;
  const std::string letters = "etaoinshrdlucmfwypvbgk";
  const size_t pairs = letters.size() * letters.size();
  // Token texts must be unique (llama.cpp refuses a vocabulary with
  // duplicates): every letter pair once, then filler tokens no merge makes.
  for (size_t i = 0; tokens.size() < static_cast<size_t>(s.n_vocab); ++i) {
    types.push_back(1);
    if (i >= pairs) {
      tokens.push_back(absl::StrCat("[extra_", i - pairs, "]"));
      continue;
    }
    const char a = letters[i % letters.size()], b = letters[i / letters.size()];
    tokens.push_back(std::string{a, b});
    merges.push_back(std::string{a, ' ', b});
  }
  w.AddString("tokenizer.ggml.model", "gpt2");
  w.AddString("tokenizer.ggml.pre", "smollm");
  w.AddStringArray("tokenizer.ggml.tokens", tokens);
  w.AddInt32Array("tokenizer.ggml.token_type", types);
  w.AddStringArray("tokenizer.ggml.merges", merges);
  w.AddUint32("tokenizer.ggml.bos_token_id", 1);
  w.AddUint32("tokenizer.ggml.eos_token_id", 2);
  w.AddBool("tokenizer.ggml.add_bos_token", false);
  w.AddString("tokenizer.chat_template",
              !s.chat_template.empty()
                  ? s.chat_template
                  : "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
                    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}");
}

// Copies the tokenizer.* metadata of `path`; returns its vocabulary size.
absl::StatusOr<int> CopyVocab(const std::string& path, GgufWriter& w) {
  ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> g, GgufFile::Open(path));
  int n_vocab = 0;
  for (const std::string& key : g->keys()) {
    if (key.rfind("tokenizer.", 0) != 0) continue;
    const GgufValue* v = g->Find(key);
    if (key == "tokenizer.ggml.tokens") {
      ASSIGN_OR_RETURN(const auto tokens, g->GetStringArray(key));
      w.AddStringArray(key, std::vector<std::string>(tokens.begin(), tokens.end()));
      n_vocab = static_cast<int>(tokens.size());
    } else if (key == "tokenizer.ggml.merges") {
      ASSIGN_OR_RETURN(const auto merges, g->GetStringArray(key));
      w.AddStringArray(key, std::vector<std::string>(merges.begin(), merges.end()));
    } else if (key == "tokenizer.ggml.token_type") {
      ASSIGN_OR_RETURN(const auto types, g->GetIntArray(key));
      w.AddInt32Array(key, std::vector<int32_t>(types.begin(), types.end()));
    } else if (key == "tokenizer.ggml.scores") {
      ASSIGN_OR_RETURN(const auto scores, g->GetFloatArray(key));
      w.AddFloat32Array(key, std::vector<float>(scores.begin(), scores.end()));
    } else if (v->type == GgufValueType::kString) {
      ASSIGN_OR_RETURN(const std::string_view text, g->GetString(key));
      w.AddString(key, text);
    } else if (v->type == GgufValueType::kBool) {
      ASSIGN_OR_RETURN(const bool b, g->GetBool(key));
      w.AddBool(key, b);
    } else if (v->type != GgufValueType::kArray && v->type != GgufValueType::kF32 &&
               v->type != GgufValueType::kF64) {  // token ids
      ASSIGN_OR_RETURN(const uint64_t id, g->GetUint(key));
      w.AddUint32(key, static_cast<uint32_t>(id));
    }
  }
  if (n_vocab == 0) return absl::InvalidArgumentError(absl::StrCat(path, " has no tokenizer"));
  return n_vocab;
}

void AddHyperParams(const RandomModelSpec& s, GgufWriter& w) {
  w.AddString("general.architecture", "llama");
  w.AddString("general.name", "pdserve random llama");
  w.AddUint32("llama.block_count", s.n_layers);
  w.AddUint32("llama.context_length", s.context_length);
  w.AddUint32("llama.embedding_length", s.n_embd);
  w.AddUint32("llama.feed_forward_length", s.n_ff);
  w.AddUint32("llama.attention.head_count", s.n_heads);
  w.AddUint32("llama.attention.head_count_kv", s.n_kv_heads);
  w.AddFloat32("llama.rope.freq_base", s.rope_base);
  w.AddFloat32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.AddUint32("llama.vocab_size", s.n_vocab);
  w.AddUint32("llama.rope.dimension_count", s.n_embd / s.n_heads);
  if (s.rope_scaling_factor > 0.0f) {
    w.AddString("llama.rope.scaling.type", "linear");
    w.AddFloat32("llama.rope.scaling.factor", s.rope_scaling_factor);
  }
}

}  // namespace

RandomModelSpec RandomModelSpec::SmolLm2Shapes() {
  RandomModelSpec s;
  s.n_layers = 30;
  s.n_embd = 576;
  s.n_ff = 1536;
  s.n_heads = 9;
  s.n_kv_heads = 3;
  s.n_vocab = 49152;
  s.context_length = 8192;
  s.rope_base = 100000.0f;
  return s;
}

RandomModelSpec RandomModelSpec::Tiny() {
  RandomModelSpec s;
  s.n_layers = 2;
  s.n_embd = 128;
  s.n_ff = 256;
  s.n_heads = 4;
  s.n_kv_heads = 2;
  s.context_length = 512;
  s.matrix_type = static_cast<uint32_t>(GgmlType::kQ8_0);
  s.embd_type = static_cast<uint32_t>(GgmlType::kQ8_0);
  s.tied_output = false;
  return s;
}

std::vector<float> Llama3RopeFreqFactors(int rope_dim, float rope_base) {
  constexpr double kFactor = 8, kLowFreqFactor = 1, kHighFreqFactor = 4, kOldContext = 8192;
  constexpr double kPi = 3.14159265358979323846;
  std::vector<float> factors;
  for (int i = 0; i < rope_dim; i += 2) {
    const double freq =
        1.0 / std::pow(static_cast<double>(rope_base), static_cast<double>(i) / rope_dim);
    const double wavelen = 2 * kPi / freq;
    if (wavelen < kOldContext / kHighFreqFactor) {
      factors.push_back(1.0f);
    } else if (wavelen > kOldContext / kLowFreqFactor) {
      factors.push_back(static_cast<float>(kFactor));
    } else {
      const double smooth =
          (kOldContext / wavelen - kLowFreqFactor) / (kHighFreqFactor - kLowFreqFactor);
      factors.push_back(static_cast<float>(1.0 / ((1 - smooth) / kFactor + smooth)));
    }
  }
  return factors;
}

absl::StatusOr<std::string> MakeRandomModelGguf(const RandomModelSpec& spec) {
  RandomModelSpec s = spec;
  GgufWriter w;
  if (s.vocab_from.empty()) {
    AddVocab(s, w);
  } else {
    ASSIGN_OR_RETURN(s.n_vocab, CopyVocab(s.vocab_from, w));
  }
  AddHyperParams(s, w);
  std::mt19937_64 rng(s.seed);
  const int64_t d = s.n_embd, hd = s.n_embd / s.n_heads, kv = hd * s.n_kv_heads;
  const float ws = 1.0f / std::sqrt(static_cast<float>(d));
  ASSIGN_OR_RETURN(std::string embd, RandomTensor(s.embd_type, d, s.n_vocab, 1.0f, rng));
  RETURN_IF_ERROR(w.AddTensor("token_embd.weight", s.embd_type, {d, s.n_vocab}, std::move(embd)));
  if (!s.tied_output) {
    ASSIGN_OR_RETURN(std::string out, RandomTensor(s.embd_type, d, s.n_vocab, 1.0f, rng));
    RETURN_IF_ERROR(w.AddTensor("output.weight", s.embd_type, {d, s.n_vocab}, std::move(out)));
  }
  RETURN_IF_ERROR(w.AddTensor("output_norm.weight", 0, {d}, OnesNorm(d, rng)));
  if (!s.rope_freq_factors.empty()) {
    const std::vector<float>& f = s.rope_freq_factors;
    RETURN_IF_ERROR(w.AddTensor(
        "rope_freqs.weight", 0, {static_cast<int64_t>(f.size())},
        std::string(reinterpret_cast<const char*>(f.data()), f.size() * sizeof(float))));
  }
  struct Mat {
    const char* name;
    int64_t in, out;
  };
  const Mat mats[] = {{"attn_q", d, d},       {"attn_k", d, kv},       {"attn_v", d, kv},
                      {"attn_output", d, d},  {"ffn_gate", d, s.n_ff}, {"ffn_up", d, s.n_ff},
                      {"ffn_down", s.n_ff, d}};
  for (int l = 0; l < s.n_layers; ++l) {
    const std::string p = absl::StrCat("blk.", l, ".");
    RETURN_IF_ERROR(w.AddTensor(p + "attn_norm.weight", 0, {d}, OnesNorm(d, rng)));
    RETURN_IF_ERROR(w.AddTensor(p + "ffn_norm.weight", 0, {d}, OnesNorm(d, rng)));
    for (const Mat& m : mats) {
      ASSIGN_OR_RETURN(std::string t, RandomTensor(s.matrix_type, m.in, m.out, ws, rng));
      RETURN_IF_ERROR(w.AddTensor(absl::StrCat(p, m.name, ".weight"), s.matrix_type, {m.in, m.out},
                                  std::move(t)));
    }
  }
  return w.Serialize();
}

absl::Status WriteRandomModelGguf(const RandomModelSpec& spec, const std::string& path) {
  ASSIGN_OR_RETURN(std::string bytes, MakeRandomModelGguf(spec));
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace pdserve
