#include "router/routing_policy.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pdserve {
namespace {

bool Contains(const std::vector<std::string>& list, const std::string& value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

bool SameLayout(const v1::KvLayout& a, const v1::KvLayout& b) {
  return a.num_layers() == b.num_layers() && a.num_kv_heads() == b.num_kv_heads() &&
         a.head_dim() == b.head_dim() && a.block_size() == b.block_size() && a.dtype() == b.dtype();
}

int64_t BlocksNeeded(const WorkerState& w, int32_t prompt_tokens) {
  const int64_t block = w.info.kv_layout().block_size();
  if (block <= 0 || prompt_tokens <= 0) return 0;
  return (prompt_tokens + block - 1) / block;
}

// Picks from `candidates` (non-empty) with `better(a, b)` = a is strictly
// preferable; exact ties rotate with `ticket`.
template <typename Better>
const WorkerState* PickBest(const std::vector<const WorkerState*>& candidates, uint64_t ticket,
                            Better better) {
  std::vector<const WorkerState*> best = {candidates.front()};
  for (size_t i = 1; i < candidates.size(); ++i) {
    if (better(*candidates[i], *best.front())) {
      best = {candidates[i]};
    } else if (!better(*best.front(), *candidates[i])) {
      best.push_back(candidates[i]);
    }
  }
  return best[ticket % best.size()];
}

const WorkerState* LeastLoadedDecode(const std::vector<const WorkerState*>& usable,
                                     int32_t prompt_tokens, uint64_t ticket) {
  std::vector<const WorkerState*> fitting;
  for (const WorkerState* w : usable) {
    if (w->load.kv_blocks_free() >= BlocksNeeded(*w, prompt_tokens)) fitting.push_back(w);
  }
  const std::vector<const WorkerState*>& pool = fitting.empty() ? usable : fitting;
  return PickBest(pool, ticket, [](const WorkerState& a, const WorkerState& b) {
    if (a.load.kv_blocks_free() != b.load.kv_blocks_free()) {
      return a.load.kv_blocks_free() > b.load.kv_blocks_free();
    }
    return a.load.running() + a.load.waiting() < b.load.running() + b.load.waiting();
  });
}

const WorkerState* LeastLoadedPrefill(const std::vector<const WorkerState*>& usable,
                                      uint64_t ticket) {
  return PickBest(usable, ticket, [](const WorkerState& a, const WorkerState& b) {
    if (a.load.queued_prompt_tokens() != b.load.queued_prompt_tokens()) {
      return a.load.queued_prompt_tokens() < b.load.queued_prompt_tokens();
    }
    return a.load.waiting() < b.load.waiting();
  });
}

std::vector<std::string> Addresses(const std::vector<WorkerState>& workers) {
  std::vector<std::string> out;
  for (const WorkerState& w : workers) out.push_back(w.address);
  return out;
}

}  // namespace

std::string FormatKvLayout(const v1::KvLayout& l) {
  return absl::StrCat("{layers=", l.num_layers(), " kv_heads=", l.num_kv_heads(),
                      " head_dim=", l.head_dim(), " block_size=", l.block_size(),
                      " dtype=", l.dtype(), "}");
}

absl::Status CheckPairCompatible(const WorkerState& prefill, const WorkerState& decode) {
  const v1::WorkerInfo& p = prefill.info;
  const v1::WorkerInfo& d = decode.info;
  if (p.model_fingerprint() != d.model_fingerprint()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "prefill worker ", prefill.address, " model fingerprint ", p.model_fingerprint(),
        " != decode worker ", decode.address, " ", d.model_fingerprint()));
  }
  if (!SameLayout(p.kv_layout(), d.kv_layout())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "prefill worker ", prefill.address, " kv layout ", FormatKvLayout(p.kv_layout()),
        " != decode worker ", decode.address, " ", FormatKvLayout(d.kv_layout())));
  }
  if (p.protocol_version() != d.protocol_version()) {
    return absl::FailedPreconditionError(
        absl::StrCat("prefill worker ", prefill.address, " protocol version ", p.protocol_version(),
                     " != decode worker ", decode.address, " ", d.protocol_version()));
  }
  return absl::OkStatus();
}

absl::StatusOr<const WorkerState*> PickDecode(const RegistrySnapshot& snapshot,
                                              const DecodeQuery& query) {
  std::vector<const WorkerState*> usable;
  std::vector<std::string> mismatches;
  bool any_live = false;
  for (const WorkerState& w : snapshot.decode) {
    if (!IsUsable(w, snapshot.stale_after, query.now)) continue;
    any_live = true;
    if (!query.model_fingerprint.empty() && w.info.model_fingerprint() != query.model_fingerprint) {
      mismatches.push_back(absl::StrCat("decode worker ", w.address, " model fingerprint ",
                                        w.info.model_fingerprint(), " != router model ",
                                        query.model_fingerprint));
      continue;
    }
    if (!Contains(query.excluded, w.address)) usable.push_back(&w);
  }
  if (!any_live) {
    return absl::UnavailableError(absl::StrCat(
        "no live decode worker (configured: ", absl::StrJoin(Addresses(snapshot.decode), ", "),
        ")"));
  }
  if (usable.empty() && query.excluded.empty()) {
    return absl::FailedPreconditionError(absl::StrJoin(mismatches, "; "));
  }
  if (usable.empty()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("every decode worker is out of KV capacity (refused by ",
                     absl::StrJoin(query.excluded, ", "), ")"));
  }
  if (query.policy == PolicyKind::kRoundRobin) return usable[query.ticket % usable.size()];
  return LeastLoadedDecode(usable, query.prompt_tokens, query.ticket);
}

absl::StatusOr<const WorkerState*> PickPrefill(const RegistrySnapshot& snapshot,
                                               const WorkerState& decode,
                                               const PrefillQuery& query) {
  std::vector<const WorkerState*> usable;
  std::vector<std::string> mismatches;
  bool any_live = false;
  bool any_compatible = false;
  for (const WorkerState& w : snapshot.prefill) {
    if (!IsUsable(w, snapshot.stale_after, query.now)) continue;
    any_live = true;
    absl::Status compatible = CheckPairCompatible(w, decode);
    if (!compatible.ok()) {
      mismatches.emplace_back(compatible.message());
      continue;
    }
    any_compatible = true;
    if (!Contains(query.excluded, w.address)) usable.push_back(&w);
  }
  if (!any_live) return absl::NotFoundError("no live prefill worker");
  if (!any_compatible) {
    return absl::FailedPreconditionError(
        absl::StrCat("no prefill worker is compatible with decode worker ", decode.address, ": ",
                     absl::StrJoin(mismatches, "; ")));
  }
  if (usable.empty()) {
    return absl::UnavailableError(absl::StrCat("every compatible prefill worker failed (",
                                               absl::StrJoin(query.excluded, ", "), ")"));
  }
  if (query.policy == PolicyKind::kRoundRobin) return usable[query.ticket % usable.size()];
  return LeastLoadedPrefill(usable, query.ticket);
}

absl::StatusOr<Placement> PlaceRequest(const RegistrySnapshot& snapshot,
                                       const PlacementQuery& query) {
  absl::StatusOr<const WorkerState*> decode = PickDecode(snapshot, query.decode);
  if (!decode.ok()) return decode.status();
  Placement placement;
  placement.decode = *decode;
  placement.local_prefill = true;
  if (query.colocated) {
    placement.why = "colocated mode";
    return placement;
  }
  if (query.decode.prompt_tokens <= query.local_prefill_max_tokens) {
    placement.why = "short prompt";
    return placement;
  }
  absl::StatusOr<const WorkerState*> prefill = PickPrefill(snapshot, **decode, query.prefill);
  if (absl::IsNotFound(prefill.status())) {
    placement.why = "no live prefill worker";
    return placement;
  }
  if (!prefill.ok()) return prefill.status();
  placement.local_prefill = false;
  placement.why = "a compatible prefill worker is live";
  return placement;
}

}  // namespace pdserve
