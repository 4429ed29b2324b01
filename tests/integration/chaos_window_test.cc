// Chaos on Gemma 3 (sliding window of 512 tokens, MQA): every prompt runs
// past the window, so the KV that moves (prefill to decode, and decode to
// decode when a drain migrates) is the window-only part, and blocks leave
// the window while streams are killed, drained, stalled and cut. The
// prompts share a long preamble (prefix cache, delta transfer). See
// chaos_harness.h for the faults, the load and the invariants.
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/golden/test_model.h"
#include "tests/integration/chaos_harness.h"

namespace pdserve {
namespace {

// About 32 tokens a sentence: `n` of them run past the window from n = 17.
std::string Logbook(int n) {
  std::string text;
  for (int i = 0; i < n; ++i) {
    absl::StrAppend(&text, "Day ", i + 1,
                    ": the keeper wrote the wind, the swell and every boat's name into her "
                    "notebook, then trimmed the lamp before the evening watch. ");
  }
  return text;
}

TEST(ChaosWindowTest, SlidingWindowStreamsSurviveFaults) {
  chaos::Workload w;
  w.name = "gemma3";
  w.model_path = testing::RealModelPath("gemma-3-270m.Q4_K_M.gguf");
  w.chat = false;  // Gemma 3 270M is a base model without a chat template
  // Different lengths past the window; the first 18 days are shared.
  w.prompts = {Logbook(18) + "Question: what did the keeper write down? Answer:",
               Logbook(20) + "The keeper's notebook",
               Logbook(22) + "On the next day the keeper",
               Logbook(24) + "Summary of the logbook:"};
  w.max_tokens = 16;
  w.requests = 24;
  w.kv_blocks = 512;
  w.min_prompt_tokens = 560;  // the window is 512
  chaos::Run(w);
}

}  // namespace
}  // namespace pdserve
