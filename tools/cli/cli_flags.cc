#include "tools/cli/cli_flags.h"

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, model, "models/SmolLM2-135M-Instruct.Q4_1.gguf",
          "Path to a GGUF model (architectures llama, mistral, qwen2, gemma3)");
ABSL_FLAG(int32_t, max_batch_tokens, 512, "Tokens per forward step (prefill chunk size)");
ABSL_FLAG(float, temperature, 0.0f, "Sampling temperature; 0 = greedy");
ABSL_FLAG(int32_t, top_k, 0, "Top-k; 0 = off");
ABSL_FLAG(float, top_p, 1.0f, "Top-p (nucleus); 1 = off");
ABSL_FLAG(float, min_p, 0.0f, "Min-p; 0 = off");
ABSL_FLAG(float, repetition_penalty, 1.0f, "Repetition penalty (llama.cpp semantics); 1 = off");
ABSL_FLAG(float, presence_penalty, 0.0f, "Presence penalty");
ABSL_FLAG(float, frequency_penalty, 0.0f, "Frequency penalty");
ABSL_FLAG(int32_t, penalty_last_n, 64, "Window of tokens the penalties look at");
ABSL_FLAG(uint64_t, seed, 0,
          "Sampling seed (with the token index, fixes every draw); bench: also seeds the workload");
ABSL_FLAG(int32_t, max_tokens, 128, "run, generate, up --demo_prompt: tokens to generate at most");
ABSL_FLAG(bool, ignore_eos, false, "Keep generating past end-of-generation tokens");
ABSL_FLAG(std::string, router, "127.0.0.1:50051", "generate, bench: router address");
// One prompt flag set for every subcommand that sends a prompt, so that
// each means the same everywhere.
ABSL_FLAG(std::string, prompt, "",
          "run, generate: prompt text (a user message with --chat); generate also takes it as "
          "its arguments");
ABSL_FLAG(bool, chat, true,
          "run, generate, up --demo_prompt: send the prompt as a user message in the model's "
          "chat template (--chat=false: as plain text)");
ABSL_FLAG(std::string, system, "",
          "run, generate, up --demo_prompt: system message for --chat (default: the model's own)");

namespace pdserve {

SamplingParams SamplingParamsFromFlags() {
  SamplingParams p;
  p.temperature = absl::GetFlag(FLAGS_temperature);
  p.top_k = absl::GetFlag(FLAGS_top_k);
  p.top_p = absl::GetFlag(FLAGS_top_p);
  p.min_p = absl::GetFlag(FLAGS_min_p);
  p.repetition_penalty = absl::GetFlag(FLAGS_repetition_penalty);
  p.presence_penalty = absl::GetFlag(FLAGS_presence_penalty);
  p.frequency_penalty = absl::GetFlag(FLAGS_frequency_penalty);
  p.penalty_last_n = absl::GetFlag(FLAGS_penalty_last_n);
  p.seed = absl::GetFlag(FLAGS_seed);
  return p;
}

}  // namespace pdserve
