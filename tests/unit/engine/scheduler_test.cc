// The decode scheduler's policy as a table: decode tokens first, then
// prefill chunks in admission order within the token budget.
#include "common/engine/scheduler.h"

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace pdserve {
namespace {

// A sequence state: prompt length and tokens computed; awaiting KV or not.
struct SeqState {
  int32_t prompt_len;
  int32_t computed;
  bool awaiting_kv = false;
};

struct Case {
  const char* name;
  SchedulerLimits limits;
  std::vector<SeqState> seqs;  // admission order, ids 1..n
  // Expected (id, n_tokens) per slot.
  std::vector<std::pair<int64_t, int32_t>> want;
};

std::map<int64_t, std::unique_ptr<Sequence>> Build(const std::vector<SeqState>& states) {
  std::map<int64_t, std::unique_ptr<Sequence>> seqs;
  int64_t id = 1;
  for (const SeqState& st : states) {
    SequenceOptions opts;
    opts.prompt.assign(st.prompt_len, 7);
    auto seq = std::make_unique<Sequence>(id, std::move(opts), nullptr);
    seq->num_computed = st.computed;
    seq->awaiting_kv = st.awaiting_kv;
    seqs.emplace(id++, std::move(seq));
  }
  return seqs;
}

TEST(SchedulerTest, Table) {
  const std::vector<Case> cases = {
      {"empty", {512, 64, 0}, {}, {}},
      {"decode tokens come before older prefills",
       {512, 64, 0},
       {{100, 0}, {10, 10}},
       {{2, 1}, {1, 100}}},
      {"prefill chunked by the budget, oldest first",
       {64, 64, 0},
       {{50, 0}, {50, 0}},
       {{1, 50}, {2, 14}}},
      {"a chunk resumes where the last step stopped",
       {512, 64, 0},
       {{100, 40}},
       {{1, 60}}},
      {"max_running caps decode and prefill slots",
       {512, 2, 0},
       {{5, 5}, {5, 5}, {5, 5}, {10, 0}},
       {{1, 1}, {2, 1}}},
      {"prefill capped while anyone decodes",
       {512, 64, 16},
       {{5, 5}, {100, 0}},
       {{1, 1}, {2, 16}}},
      {"no cap without a decoding sequence",
       {512, 64, 16},
       {{100, 0}},
       {{1, 100}}},
      {"a sequence awaiting KV is never scheduled",
       {512, 64, 0},
       {{20, 0, true}, {20, 20, true}, {4, 0}},
       {{3, 4}}},
      {"a spent budget ends the batch",
       {2, 64, 0},
       {{5, 5}, {5, 5}, {5, 5}, {10, 0}},
       {{1, 1}, {2, 1}}},
  };
  for (const Case& c : cases) {
    auto seqs = Build(c.seqs);
    std::vector<std::pair<int64_t, int32_t>> got;
    for (const ScheduledSlot& s : ScheduleStep(seqs, c.limits)) got.push_back({s.seq->id, s.n_tokens});
    EXPECT_EQ(got, c.want) << c.name;
  }
}

}  // namespace
}  // namespace pdserve
