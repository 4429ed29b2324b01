// Conversations: the named text workloads of `pdserve bench --workload`,
// chats that stand for how speculative decoding is used (docs/PERFORMANCE.md,
// "Speculative decoding"):
//   code-edit  rename a parameter in 24 short Python functions given in the
//              prompt; the answer copies the code with one word changed
//   summary    summarise a passage, quoting its key sentences word for word
//   chat       a real multi-turn chat whose last turn asks the assistant to
//              restate its first answer and extend it
//   no-copy    a story with nothing to copy: the cost of drafts that fail
// Request i of a workload is a function of (seed, i) alone, and differs from
// request j in its names, numbers and sentence order, so no two prompts share
// more than their instructions' prefix. Every server is sent the same
// messages; each renders them with its own chat template.
//
// Thread-safety: free functions on immutable data.
#ifndef PDSERVE_TOOLS_BENCH_BENCH_CONVERSATION_H_
#define PDSERVE_TOOLS_BENCH_BENCH_CONVERSATION_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/text/chat_template.h"

namespace pdserve {

enum class ConversationKind { kCodeEdit, kSummary, kChat, kNoCopy };

// "code-edit", "summary", "chat" or "no-copy"; INVALID_ARGUMENT naming the
// choices otherwise.
absl::StatusOr<ConversationKind> ParseConversationKind(absl::string_view name);
absl::string_view ConversationKindName(ConversationKind kind);

// The messages of request `index`; the last one is the user's.
std::vector<ChatMessage> MakeConversation(ConversationKind kind, uint64_t seed, int64_t index);

}  // namespace pdserve

#endif  // PDSERVE_TOOLS_BENCH_BENCH_CONVERSATION_H_
