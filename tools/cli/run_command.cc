#include "tools/cli/run_command.h"

#include <cstdio>
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/base/status_macros.h"
#include "common/engine/engine.h"
#include "common/model/model.h"
#include "common/runtime/runtime_factory.h"
#include "common/text/detokenizer.h"
#include "common/worker/speculation_flags.h"
#include "glog/logging.h"
#include "tools/cli/cli_flags.h"

ABSL_FLAG(bool, print_token_ids, false, "Print generated token ids (one line) instead of text");

namespace pdserve {
namespace {

absl::StatusOr<std::vector<int32_t>> PromptTokens(const Model& model) {
  const std::string prompt = absl::GetFlag(FLAGS_prompt);
  if (!absl::GetFlag(FLAGS_chat)) return model.tokenizer().EncodePrompt(prompt);
  std::vector<ChatMessage> messages;
  if (!absl::GetFlag(FLAGS_system).empty()) {
    messages.push_back({"system", absl::GetFlag(FLAGS_system)});
  }
  messages.push_back({"user", prompt});
  ASSIGN_OR_RETURN(std::string text, model.chat_template().Render(messages, true));
  return model.tokenizer().EncodePrompt(text);
}

// On stderr, so that the output stays the text alone. The decode rate
// counts the tokens after the first over the time since the first.
void LogRunStats(const SpeculationStats& s, size_t tokens, int64_t steps, absl::Duration decode) {
  SpeculationStats::PerSource drafts;
  for (const SpeculationStats::PerSource& source : s.source) {
    drafts.drafted += source.drafted;
    drafts.accepted += source.accepted;
  }
  const double rate = tokens > 1 ? (tokens - 1) / std::max(1e-9, absl::ToDoubleSeconds(decode)) : 0;
  LOG(INFO) << tokens << " tokens in " << steps << " steps, decode "
            << absl::StrFormat("%.1f", rate) << " tokens/s; drafts: " << drafts.accepted << " of "
            << drafts.drafted << " draft tokens kept";
}

}  // namespace

absl::Status RunCommand() {
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Load(absl::GetFlag(FLAGS_model)));
  ASSIGN_OR_RETURN(EngineRuntime rt, CreateEngineRuntime(*model, EngineRuntimeFlagsFromFlags()));
  ASSIGN_OR_RETURN(SpeculationOptions speculation, SpeculationOptionsFromFlags());
  Engine engine(&model->tokenizer(), rt.runner.get(), rt.cache.get(),
                {.max_batch_tokens = absl::GetFlag(FLAGS_max_batch_tokens),
                 .max_running = 1,
                 .speculation = speculation});
  SequenceOptions opts;
  ASSIGN_OR_RETURN(opts.prompt, PromptTokens(*model));
  opts.sampling = SamplingParamsFromFlags();
  opts.max_tokens = absl::GetFlag(FLAGS_max_tokens);
  opts.ignore_eos = absl::GetFlag(FLAGS_ignore_eos);
  const bool ids = absl::GetFlag(FLAGS_print_token_ids);
  IncrementalDetokenizer detok(model->tokenizer());
  std::vector<int32_t> generated;
  absl::Time first = absl::Now();  // of the first token
  RETURN_IF_ERROR(engine
                      .Add(std::move(opts),
                           [&](const TokenEvent& e) {
                             if (e.token < 0) return;
                             if (generated.empty()) first = absl::Now();
                             generated.push_back(e.token);
                             if (!ids) std::fputs(detok.Push(e.token).c_str(), stdout);
                             std::fflush(stdout);
                           })
                      .status());
  int64_t steps = 0;
  for (; engine.HasWork(); ++steps) RETURN_IF_ERROR(engine.Step());
  LogRunStats(engine.speculation_stats(), generated.size(), steps, absl::Now() - first);
  if (ids) {
    std::printf("%s\n", absl::StrJoin(generated, " ").c_str());
  } else {
    std::printf("%s\n", detok.Flush().c_str());
  }
  return absl::OkStatus();
}

}  // namespace pdserve
