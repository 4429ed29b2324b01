// Prompt lookup's cost per decode step at long contexts, with a learned
// edit, so that the history is also read through the edits
// (docs/PERFORMANCE.md, "Speculative decoding"). Each step appends
// --append tokens and drafts up to --draft.
#include <chrono>
#include <cstdint>
#include <iostream>
#include <random>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "common/engine/copy_edits.h"
#include "common/engine/prompt_lookup.h"

ABSL_FLAG(int32_t, tokens, 32768, "history length before the timed steps");
ABSL_FLAG(int32_t, steps, 400, "timed steps");
ABSL_FLAG(int32_t, append, 4, "tokens appended per step");
ABSL_FLAG(int32_t, draft, 16, "longest draft");

namespace pdserve {
namespace {

// Teaches `edits` the rename 10 -> 20 21 the way verification would, and
// returns the history that taught it.
std::vector<int32_t> TeachRename(CopyEdits& edits) {
  std::vector<int32_t> h = {1,  2,  3, 4, 5, 6, 7, 8, 10, 11, 12, 13,
                            14, 15, 0, 1, 2, 3, 4, 5, 6,  7,  8,  20};
  edits.OnVerified(h, 23, {8, {8, 9}, {-1, -1}}, std::vector<int32_t>{10, 11}, 0);
  h.insert(h.end(), {21, 11, 12, 13, 14, 15});
  edits.Confirm(h);
  return h;
}

int Run() {
  CopyEdits edits;
  std::vector<int32_t> h = TeachRename(edits);
  if (edits.empty()) {
    std::cerr << "the edit was not learned\n";
    return 1;
  }
  std::mt19937 rng(1);
  std::uniform_int_distribution<int32_t> token(30, 3000);
  std::uniform_int_distribution<int> one_in_ten(0, 9);
  // Every tenth token is the renamed one, so the edit applies throughout.
  while (static_cast<int32_t>(h.size()) < absl::GetFlag(FLAGS_tokens)) {
    h.push_back(one_in_ten(rng) == 0 ? 10 : token(rng));
  }
  const int32_t steps = absl::GetFlag(FLAGS_steps);
  size_t drafted = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int32_t s = 0; s < steps; ++s) {
    for (int32_t k = 0; k < absl::GetFlag(FLAGS_append); ++k) h.push_back(token(rng));
    edits.Confirm(h);
    drafted += PromptLookupDraft(h, 2, 64, absl::GetFlag(FLAGS_draft), &edits).tokens.size();
  }
  const double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  std::cout << absl::GetFlag(FLAGS_tokens) << " tokens: " << us / steps << " us a step (" << drafted
            << " draft tokens)\n";
  return 0;
}

}  // namespace
}  // namespace pdserve

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return pdserve::Run();
}
