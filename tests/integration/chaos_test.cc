// Chaos on SmolLM2 (llama, chat): workers killed, drained, stalled and
// their KV links cut under a mixed gRPC / OpenAI HTTP load, over a plain
// and an encrypted KV plane; see chaos_harness.h for the faults, the load
// and the invariants.
#include "gtest/gtest.h"
#include "tests/golden/test_model.h"
#include "tests/integration/chaos_harness.h"

namespace pdserve {
namespace {

chaos::Workload SmolLm2() {
  chaos::Workload w;
  w.name = "smollm2";
  w.model_path = testing::RealModelPath();
  w.chat = true;  // every prompt shares the template's system prompt
  w.prompts = {"What is the capital of France?",
               "Write a haiku about the sea.",
               "Give me three tips for learning to cook.",
               "Explain what a hash table is in one paragraph.",
               "Why is the sky blue?",
               "Translate 'good morning' into Spanish and German.",
               "List the planets of the solar system.",
               "What should I pack for a weekend hike?"};
  w.max_tokens = 24;
  w.requests = 100;
  w.kv_blocks = 256;
  return w;
}

TEST(ChaosTest, FailingWorkersNeverCorruptHangOrLeak) { chaos::Run(SmolLm2()); }

// The same faults with the KV plane over mutual TLS (--kv_tls): cut links
// and killed peers mid-handshake and mid-record.
TEST(ChaosTest, EncryptedKvPlaneSurvivesTheSameFaults) {
  chaos::Workload w = SmolLm2();
  w.name = "smollm2-kv-tls";
  w.kv_tls = true;
  w.requests = 48;
  chaos::Run(w);
}

}  // namespace
}  // namespace pdserve
