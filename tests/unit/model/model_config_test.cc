#include "common/model/model_config.h"

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "common/gguf/gguf_file.h"
#include "common/gguf/gguf_writer.h"
#include "common/model/model_weights.h"
#include "common/model/random_model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pdserve {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;

// Edits applied while copying a GGUF: dropped keys/tensors, then `extra`
// (which may override copied keys or add tensors).
struct Edit {
  std::set<std::string> drop_keys;
  std::set<std::string> drop_tensors;
  std::string key_prefix_from, key_prefix_to;  // renames key prefixes
  std::function<void(GgufWriter&)> extra;
};

std::unique_ptr<GgufFile> Rewrite(const GgufFile& g, const Edit& e) {
  GgufWriter w;
  for (const std::string& key : g.keys()) {
    if (e.drop_keys.count(key) != 0) continue;
    std::string out = key;
    if (!e.key_prefix_from.empty() && absl::StartsWith(key, e.key_prefix_from)) {
      out = e.key_prefix_to + key.substr(e.key_prefix_from.size());
    }
    const GgufValue* v = g.Find(key);
    switch (v->type) {
      case GgufValueType::kString:
        w.AddString(out, v->str);
        break;
      case GgufValueType::kU32:
        w.AddUint32(out, static_cast<uint32_t>(v->u));
        break;
      case GgufValueType::kI32:
        w.AddInt32(out, static_cast<int32_t>(v->i));
        break;
      case GgufValueType::kF32:
        w.AddFloat32(out, static_cast<float>(v->f));
        break;
      case GgufValueType::kBool:
        w.AddBool(out, v->u != 0);
        break;
      case GgufValueType::kArray:
        if (v->elem_type == GgufValueType::kString) {
          w.AddStringArray(out, std::vector<std::string>(v->strings.begin(), v->strings.end()));
        } else {
          const std::vector<int64_t> ints = *g.GetIntArray(key);
          w.AddInt32Array(out, std::vector<int32_t>(ints.begin(), ints.end()));
        }
        break;
      default:
        ADD_FAILURE() << "unhandled metadata type for " << key;
    }
  }
  for (const GgufTensorInfo& t : g.tensors()) {
    if (e.drop_tensors.count(t.name) != 0) continue;
    std::vector<int64_t> dims(t.ne, t.ne + t.n_dims);
    EXPECT_TRUE(w.AddTensor(t.name, t.type, dims,
                            std::string(reinterpret_cast<const char*>(t.data), t.nbytes))
                    .ok());
  }
  if (e.extra) e.extra(w);
  auto file = GgufFile::FromBuffer(w.Serialize());
  EXPECT_TRUE(file.ok()) << file.status();
  return file.ok() ? std::move(*file) : nullptr;
}

std::unique_ptr<GgufFile> RandomGguf(const RandomModelSpec& spec) {
  auto bytes = MakeRandomModelGguf(spec);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  auto file = GgufFile::FromBuffer(std::move(*bytes));
  EXPECT_TRUE(file.ok()) << file.status();
  return std::move(*file);
}

RandomModelSpec SmallSpec() {
  RandomModelSpec s;
  s.n_layers = 2;
  s.n_embd = 64;
  s.n_heads = 4;
  s.n_kv_heads = 2;
  s.n_ff = 96;
  s.n_vocab = 280;
  s.context_length = 128;
  s.rope_base = 50000.0f;
  return s;
}

TEST(ModelConfigTest, ReadsRandomModels) {
  RandomModelSpec s = SmallSpec();
  for (int variant = 0; variant < 2; ++variant) {
    if (variant == 1) {
      s.n_layers = 3, s.n_embd = 96, s.n_heads = 6, s.n_kv_heads = 6, s.n_vocab = 300;
    }
    auto g = RandomGguf(s);
    auto c = ModelConfig::FromGguf(*g);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->architecture, "llama");
    EXPECT_EQ(c->name, "pdserve random llama");
    EXPECT_EQ(c->n_layers, s.n_layers);
    EXPECT_EQ(c->n_embd, s.n_embd);
    EXPECT_EQ(c->n_ff, s.n_ff);
    EXPECT_EQ(c->n_heads, s.n_heads);
    EXPECT_EQ(c->n_kv_heads, s.n_kv_heads);
    EXPECT_EQ(c->head_dim, s.n_embd / s.n_heads);
    EXPECT_EQ(c->rope_dim, c->head_dim);
    EXPECT_EQ(c->n_vocab, s.n_vocab);
    EXPECT_EQ(c->context_length, s.context_length);
    EXPECT_FLOAT_EQ(c->rope_base, s.rope_base);
    EXPECT_FLOAT_EQ(c->rms_eps, 1e-5f);
    EXPECT_TRUE(c->tied_output);
    EXPECT_EQ(c->q_dim(), s.n_embd);
    EXPECT_EQ(c->kv_dim(), s.n_kv_heads * c->head_dim);
  }
}

TEST(ModelConfigTest, MissingRequiredKeysAreNamed) {
  auto g = RandomGguf(SmallSpec());
  for (const char* key : {"general.architecture", "llama.block_count", "llama.embedding_length",
                          "llama.feed_forward_length", "llama.attention.head_count",
                          "llama.context_length", "llama.attention.layer_norm_rms_epsilon"}) {
    auto edited = Rewrite(*g, {.drop_keys = {key}});
    ASSERT_NE(edited, nullptr);
    auto c = ModelConfig::FromGguf(*edited);
    ASSERT_FALSE(c.ok()) << key;
    EXPECT_THAT(c.status().code(),
                AnyOf(absl::StatusCode::kNotFound, absl::StatusCode::kFailedPrecondition,
                      absl::StatusCode::kInvalidArgument))
        << c.status();
    EXPECT_THAT(std::string(c.status().message()), HasSubstr(key));
  }
}

TEST(ModelConfigTest, OptionalKeysHaveLlamaDefaults) {
  auto g = RandomGguf(SmallSpec());
  auto edited =
      Rewrite(*g, {.drop_keys = {"llama.attention.head_count_kv", "llama.rope.dimension_count",
                                 "llama.rope.freq_base", "llama.vocab_size", "general.name"}});
  auto c = ModelConfig::FromGguf(*edited);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->n_kv_heads, c->n_heads);
  EXPECT_EQ(c->rope_dim, c->head_dim);
  EXPECT_FLOAT_EQ(c->rope_base, 10000.0f);
  EXPECT_EQ(c->n_vocab, 280);  // from the token list
}

TEST(ModelConfigTest, UnsupportedArchitectureNamesIt) {
  auto g = RandomGguf(SmallSpec());
  auto edited = Rewrite(
      *g, {.key_prefix_from = "llama.", .key_prefix_to = "gpt2.", .extra = [](GgufWriter& w) {
             w.AddString("general.architecture", "gpt2");
           }});
  auto c = ModelConfig::FromGguf(*edited);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("gpt2"));
}

TEST(ModelConfigTest, MistralIsLlamaFamily) {
  auto g = RandomGguf(SmallSpec());
  auto edited = Rewrite(
      *g, {.key_prefix_from = "llama.", .key_prefix_to = "mistral.", .extra = [](GgufWriter& w) {
             w.AddString("general.architecture", "mistral");
           }});
  auto c = ModelConfig::FromGguf(*edited);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "mistral");
  EXPECT_EQ(c->n_layers, 2);
}

TEST(ModelConfigTest, RejectsInconsistentShapes) {
  auto g = RandomGguf(SmallSpec());
  struct Case {
    const char* what;
    std::function<void(GgufWriter&)> extra;
    const char* mention;
  };
  const Case cases[] = {
      {"heads not a multiple of kv heads",
       [](GgufWriter& w) { w.AddUint32("llama.attention.head_count_kv", 3); }, "head_count"},
      {"zero layers", [](GgufWriter& w) { w.AddUint32("llama.block_count", 0); },
       "llama.block_count"},
      {"odd rope dim", [](GgufWriter& w) { w.AddUint32("llama.rope.dimension_count", 15); },
       "rope"},
      {"rope dim above head dim",
       [](GgufWriter& w) { w.AddUint32("llama.rope.dimension_count", 32); }, "rope"},
      {"negative epsilon",
       [](GgufWriter& w) { w.AddFloat32("llama.attention.layer_norm_rms_epsilon", -1.0f); },
       "epsilon"},
  };
  for (const Case& c : cases) {
    auto edited = Rewrite(*g, {.extra = c.extra});
    auto config = ModelConfig::FromGguf(*edited);
    ASSERT_FALSE(config.ok()) << c.what;
    EXPECT_EQ(config.status().code(), absl::StatusCode::kFailedPrecondition)
        << c.what << ": " << config.status();
    EXPECT_THAT(std::string(config.status().message()), HasSubstr(c.mention)) << c.what;
  }
}

TEST(ModelConfigTest, ReadsRopeScalingAndFreqFactors) {
  RandomModelSpec s = SmallSpec();
  s.rope_scaling_factor = 4.0f;
  s.rope_freq_factors = Llama3RopeFreqFactors(16, s.rope_base);
  auto c = ModelConfig::FromGguf(*RandomGguf(s));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FLOAT_EQ(c->rope_freq_scale, 0.25f);
  EXPECT_EQ(c->rope_freq_factors, s.rope_freq_factors);
  // LLaMA 3.1's factors: 1 for short wavelengths, 8 for long ones.
  EXPECT_FLOAT_EQ(s.rope_freq_factors.front(), 1.0f);
  EXPECT_FLOAT_EQ(s.rope_freq_factors.back(), 8.0f);
  auto plain = ModelConfig::FromGguf(*RandomGguf(SmallSpec()));
  ASSERT_TRUE(plain.ok());
  EXPECT_FLOAT_EQ(plain->rope_freq_scale, 1.0f);
  EXPECT_TRUE(plain->rope_freq_factors.empty());
}

TEST(ModelConfigTest, ScalingTypeNoneIgnoresTheFactor) {
  auto g = RandomGguf(SmallSpec());
  auto edited = Rewrite(*g, {.extra = [](GgufWriter& w) {
    w.AddString("llama.rope.scaling.type", "none");
    w.AddFloat32("llama.rope.scaling.factor", 4.0f);
  }});
  auto c = ModelConfig::FromGguf(*edited);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FLOAT_EQ(c->rope_freq_scale, 1.0f);
}

TEST(ModelConfigTest, RefusesMixtureOfExperts) {
  auto g = RandomGguf(SmallSpec());
  auto c = ModelConfig::FromGguf(
      *Rewrite(*g, {.extra = [](GgufWriter& w) { w.AddUint32("llama.expert_count", 8); }}));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("mixture of experts"));
}

TEST(ModelConfigTest, RefusesRopeItCannotCompute) {
  auto g = RandomGguf(SmallSpec());
  struct Case {
    const char* what;
    std::function<void(GgufWriter&)> extra;
    const char* mention;
  };
  const std::string wrong_size(8 * sizeof(float), '\0');
  const Case cases[] = {
      {"yarn", [](GgufWriter& w) { w.AddString("llama.rope.scaling.type", "yarn"); }, "yarn"},
      {"negative factor", [](GgufWriter& w) { w.AddFloat32("llama.rope.scaling.factor", -2.0f); },
       "factor"},
      {"rope_freqs of the wrong size",
       [&wrong_size](GgufWriter& w) {
         ASSERT_TRUE(w.AddTensor("rope_freqs.weight", 0, {8}, wrong_size).ok());
       },
       "rope_freqs"},
  };
  for (const Case& c : cases) {
    auto edited = Rewrite(*g, {.extra = c.extra});
    auto config = ModelConfig::FromGguf(*edited);
    ASSERT_FALSE(config.ok()) << c.what;
    EXPECT_EQ(config.status().code(), absl::StatusCode::kFailedPrecondition) << c.what;
    EXPECT_THAT(std::string(config.status().message()), HasSubstr(c.mention)) << c.what;
  }
}

TEST(ModelWeightsTest, BindsEveryTensorOfARandomModel) {
  auto g = RandomGguf(SmallSpec());
  auto c = ModelConfig::FromGguf(*g);
  ASSERT_TRUE(c.ok());
  auto w = ModelWeights::Load(*g, *c);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(w->layers.size(), 2u);
  EXPECT_EQ(w->output.data, w->token_embd.data);  // tied
  EXPECT_EQ(w->token_embd.in, 64);
  EXPECT_EQ(w->token_embd.out, 280);
  EXPECT_EQ(w->output_norm.size(), 64u);
  const LayerWeights& l = w->layers[1];
  EXPECT_EQ(l.attn_norm.size(), 64u);
  EXPECT_EQ(l.wk.out, c->kv_dim());
  EXPECT_EQ(l.wq.out, c->q_dim());
  EXPECT_EQ(l.w_down.in, 96);
  EXPECT_EQ(l.w_down.out, 64);
  const GgufTensorInfo* t = g->FindTensor("blk.1.ffn_gate.weight");
  EXPECT_EQ(l.w_gate.data, t->data);  // views into the file, no copy
  EXPECT_EQ(l.w_gate.row_bytes, t->row_bytes);
  EXPECT_EQ(l.w_gate.row(3), t->data + 3 * t->row_bytes);
  EXPECT_EQ(l.ffn_norm[5],
            reinterpret_cast<const float*>(g->FindTensor("blk.1.ffn_norm.weight")->data)[5]);
}

TEST(ModelWeightsTest, UntiedOutputIsBoundSeparately) {
  auto g = RandomGguf(SmallSpec());
  auto edited = Rewrite(*g, {.extra = [](GgufWriter& w) {
    EXPECT_TRUE(w.AddTensor("output.weight", 0, {64, 280}, std::string(64 * 280 * 4, '\0')).ok());
  }});
  auto c = ModelConfig::FromGguf(*edited);
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->tied_output);
  auto w = ModelWeights::Load(*edited, *c);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->output.data, edited->FindTensor("output.weight")->data);
  EXPECT_EQ(w->output.type, 0u);
}

void ExpectLoadError(const GgufFile& g, const std::string& mention) {
  auto c = ModelConfig::FromGguf(g);
  ASSERT_TRUE(c.ok()) << c.status();
  auto w = ModelWeights::Load(g, *c);
  ASSERT_FALSE(w.ok()) << mention;
  EXPECT_EQ(w.status().code(), absl::StatusCode::kFailedPrecondition) << w.status();
  EXPECT_THAT(std::string(w.status().message()), HasSubstr(mention));
}

TEST(ModelWeightsTest, MissingTensorIsNamed) {
  auto g = RandomGguf(SmallSpec());
  for (const char* name : {"blk.1.ffn_up.weight", "token_embd.weight", "output_norm.weight",
                           "blk.0.attn_norm.weight"}) {
    ExpectLoadError(*Rewrite(*g, {.drop_tensors = {name}}), name);
  }
}

TEST(ModelWeightsTest, WrongShapeIsNamed) {
  auto g = RandomGguf(SmallSpec());
  const int64_t q41_row = 40;  // 64 elements of Q4_1
  // attn_k should be {64, 32} (2 kv heads of 16); give it {64, 64}.
  ExpectLoadError(*Rewrite(*g, {.drop_tensors = {"blk.0.attn_k.weight"},
                                .extra =
                                    [&](GgufWriter& w) {
                                      EXPECT_TRUE(w.AddTensor("blk.0.attn_k.weight", 3, {64, 64},
                                                              std::string(q41_row * 64, '\0'))
                                                      .ok());
                                    }}),
                  "blk.0.attn_k.weight");
  // A norm that is 2-D.
  ExpectLoadError(*Rewrite(*g, {.drop_tensors = {"blk.1.ffn_norm.weight"},
                                .extra =
                                    [](GgufWriter& w) {
                                      EXPECT_TRUE(w.AddTensor("blk.1.ffn_norm.weight", 0, {64, 2},
                                                              std::string(64 * 2 * 4, '\0'))
                                                      .ok());
                                    }}),
                  "blk.1.ffn_norm.weight");
}

TEST(ModelWeightsTest, TensorsTheForwardPassDoesNotReadAreRefused) {
  auto g = RandomGguf(SmallSpec());
  for (const char* name :
       {"blk.0.attn_q.bias", "blk.1.ffn_gate_inp.weight", "blk.2.attn_norm.weight"}) {
    ExpectLoadError(
        *Rewrite(*g, {.extra =
                          [name](GgufWriter& w) {
                            EXPECT_TRUE(w.AddTensor(name, 0, {64}, std::string(64 * 4, '\0')).ok());
                          }}),
        name);
  }
}

TEST(ModelWeightsTest, TypeWithoutKernelsIsNamed) {
  auto g = RandomGguf(SmallSpec());
  // Q8_1 (id 9, an activation format): 64 elements = 2 blocks of 36 bytes;
  // no matmul kernel takes it as weights.
  ExpectLoadError(*Rewrite(*g, {.drop_tensors = {"blk.0.ffn_up.weight"},
                                .extra =
                                    [](GgufWriter& w) {
                                      EXPECT_TRUE(w.AddTensor("blk.0.ffn_up.weight", 9, {64, 96},
                                                              std::string(72 * 96, '\0'))
                                                      .ok());
                                    }}),
                  "blk.0.ffn_up.weight");
}

}  // namespace
}  // namespace pdserve
