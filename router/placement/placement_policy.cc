#include "router/placement/placement_policy.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status_macros.h"
#include "router/placement/prefix_hit.h"

namespace pdserve::router {
namespace {

bool Contains(const std::vector<std::string>& list, const std::string& value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

// Drops circuit-broken workers unless that leaves none: a worker that keeps
// failing is avoided, but an ejected worker beats refusing the request.
void PreferNotEjected(const std::vector<std::string>& ejected,
                      std::vector<const WorkerState*>* usable) {
  std::vector<const WorkerState*> healthy;
  for (const WorkerState* w : *usable) {
    if (!Contains(ejected, w->address)) healthy.push_back(w);
  }
  if (!healthy.empty()) *usable = std::move(healthy);
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

int64_t Sequences(const WorkerState& w) { return int64_t{w.load.running()} + w.load.waiting(); }

bool LessLoadedDecode(const WorkerState& a, const WorkerState& b) {
  if (a.load.kv_blocks_free() != b.load.kv_blocks_free()) {
    return a.load.kv_blocks_free() > b.load.kv_blocks_free();
  }
  return Sequences(a) < Sequences(b);
}

bool LessLoadedPrefill(const WorkerState& a, const WorkerState& b) {
  if (a.load.queued_prompt_tokens() != b.load.queued_prompt_tokens()) {
    return a.load.queued_prompt_tokens() < b.load.queued_prompt_tokens();
  }
  return a.load.waiting() < b.load.waiting();
}

// The workers whose free blocks fit `tokens(w)` more prompt tokens, or all
// of them if none does: load reports lag, and the worker's own
// RESOURCE_EXHAUSTED is authoritative.
template <typename Tokens>
std::vector<const WorkerState*> Fitting(const std::vector<const WorkerState*>& usable,
                                        Tokens tokens) {
  std::vector<const WorkerState*> fitting;
  for (const WorkerState* w : usable) {
    if (w->load.kv_blocks_free() >= BlocksNeeded(*w, tokens(*w))) fitting.push_back(w);
  }
  return fitting.empty() ? usable : fitting;
}

const WorkerState* LeastLoadedDecode(const std::vector<const WorkerState*>& usable,
                                     int32_t prompt_tokens, uint64_t ticket) {
  return PickBest(Fitting(usable, [&](const WorkerState&) { return prompt_tokens; }), ticket,
                  LessLoadedDecode);
}

const WorkerState* LeastLoadedPrefill(const std::vector<const WorkerState*>& usable,
                                      uint64_t ticket) {
  return PickBest(usable, ticket, LessLoadedPrefill);
}

// Prompt tokens `w` would have to receive or compute: never below one, as
// the last prompt token is always computed.
int32_t Uncached(int32_t prompt_tokens, int32_t hit) { return std::max(prompt_tokens - hit, 1); }

const WorkerState* PrefixAwareDecode(const std::vector<const WorkerState*>& usable,
                                     int32_t prompt_tokens, PromptKeys* keys, uint64_t ticket) {
  absl::flat_hash_map<const WorkerState*, int32_t> uncached;
  for (const WorkerState* w : usable) uncached[w] = Uncached(prompt_tokens, keys->HitTokens(*w));
  auto cost = [&](const WorkerState& w) {
    return int64_t{uncached.at(&w)} + kSequenceCostTokens * Sequences(w);
  };
  return PickBest(Fitting(usable, [&](const WorkerState& w) { return uncached.at(&w); }), ticket,
                  [&](const WorkerState& a, const WorkerState& b) {
                    if (cost(a) != cost(b)) return cost(a) < cost(b);
                    return LessLoadedDecode(a, b);
                  });
}

const WorkerState* PrefixAwarePrefill(const std::vector<const WorkerState*>& usable,
                                      int32_t prompt_tokens, PromptKeys* keys, uint64_t ticket) {
  absl::flat_hash_map<const WorkerState*, int64_t> cost;
  for (const WorkerState* w : usable) {
    cost[w] = Uncached(prompt_tokens, keys->HitTokens(*w)) +
              static_cast<int64_t>(w->load.queued_prompt_tokens());
  }
  return PickBest(usable, ticket, [&](const WorkerState& a, const WorkerState& b) {
    if (cost.at(&a) != cost.at(&b)) return cost.at(&a) < cost.at(&b);
    return a.load.waiting() < b.load.waiting();
  });
}

// Every usable prefill worker compatible with `decode` has at least
// `prefill_saturation_tokens` prompt tokens queued (never with 0).
bool PrefillTierSaturated(const RegistrySnapshot& snapshot, const WorkerState& decode,
                          const PlacementQuery& query) {
  if (query.prefill_saturation_tokens <= 0) return false;
  for (const WorkerState& w : snapshot.prefill) {
    if (!IsUsable(w, snapshot.stale_after, query.prefill.now) ||
        Contains(query.prefill.excluded, w.address) || !CheckPairCompatible(w, decode).ok()) {
      continue;
    }
    if (static_cast<int64_t>(w.load.queued_prompt_tokens()) < query.prefill_saturation_tokens) {
      return false;
    }
  }
  return true;
}

// Drops the workers whose whole pool (kv_blocks_total; 0 = not reported)
// is smaller than the request's reservation: that refusal would be the same
// every time, so a request no usable pool holds is OUT_OF_RANGE, not a
// RESOURCE_EXHAUSTED that invites retries.
absl::Status KeepPoolsThatHold(const DecodeQuery& query, std::vector<const WorkerState*>* usable) {
  if (query.max_tokens <= 0) return absl::OkStatus();
  const int32_t reserved_tokens = query.prompt_tokens + query.max_tokens - 1;
  int64_t largest = 0;
  int64_t need = 0;
  std::vector<const WorkerState*> hold;
  for (const WorkerState* w : *usable) {
    const int64_t total = w->load.kv_blocks_total();
    const int64_t blocks = BlocksNeeded(*w, reserved_tokens);
    if (total == 0 || blocks <= total) {
      hold.push_back(w);
    } else if (total > largest) {
      largest = total;
      need = blocks;
    }
  }
  if (hold.empty()) {
    return absl::OutOfRangeError(absl::StrCat(
        "prompt (", query.prompt_tokens, " tokens) + max_tokens (", query.max_tokens, ") need ",
        need, " KV blocks; the largest decode worker pool holds ", largest));
  }
  *usable = std::move(hold);
  return absl::OkStatus();
}

std::vector<std::string> Addresses(const std::vector<WorkerState>& workers) {
  std::vector<std::string> out;
  for (const WorkerState& w : workers) out.push_back(w.address);
  return out;
}

}  // namespace

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
  RETURN_IF_ERROR(KeepPoolsThatHold(query, &usable));
  PreferNotEjected(query.ejected, &usable);
  switch (query.policy) {
    case PolicyKind::kRoundRobin:
      return usable[query.ticket % usable.size()];
    case PolicyKind::kPrefixAware: {
      PromptKeys keys(query.prompt);
      return PrefixAwareDecode(usable, query.prompt_tokens, &keys, query.ticket);
    }
    case PolicyKind::kLeastLoaded:
      break;
  }
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
  PreferNotEjected(query.ejected, &usable);
  switch (query.policy) {
    case PolicyKind::kRoundRobin:
      return usable[query.ticket % usable.size()];
    case PolicyKind::kPrefixAware: {
      PromptKeys keys(query.prompt);
      return PrefixAwarePrefill(usable, static_cast<int32_t>(query.prompt.size()), &keys,
                                query.ticket);
    }
    case PolicyKind::kLeastLoaded:
      break;
  }
  return LeastLoadedPrefill(usable, query.ticket);
}

namespace {

// PlaceRequest on the best decode worker of `query`; `*chosen` is that
// worker, or null when none was picked.
absl::StatusOr<Placement> PlaceOnBestDecode(const RegistrySnapshot& snapshot,
                                            const PlacementQuery& query,
                                            const WorkerState** chosen) {
  absl::StatusOr<const WorkerState*> decode = PickDecode(snapshot, query.decode);
  if (!decode.ok()) return decode.status();
  *chosen = *decode;
  Placement placement;
  placement.decode = *decode;
  placement.local_prefill = true;
  PromptKeys keys(query.decode.prompt);
  placement.decode_cached_tokens = keys.HitTokens(**decode);
  if (query.colocated) {
    placement.why = query.forced_why;
    placement.reason = query.forced_reason;
    return placement;
  }
  if (Uncached(query.decode.prompt_tokens, placement.decode_cached_tokens) <=
      query.local_prefill_max_tokens) {
    placement.why = "short uncached prompt";
    placement.reason = "short_uncached_prompt";
    return placement;
  }
  absl::StatusOr<const WorkerState*> prefill = PickPrefill(snapshot, **decode, query.prefill);
  if (absl::IsNotFound(prefill.status())) {
    placement.why = "no live prefill worker";
    placement.reason = "no_prefill_worker";
    return placement;
  }
  if (!prefill.ok()) return prefill.status();
  if (PrefillTierSaturated(snapshot, **decode, query)) {
    placement.why = "the prefill tier is saturated";
    placement.reason = "prefill_saturated";
    return placement;
  }
  placement.local_prefill = false;
  placement.why = "a compatible prefill worker is live";
  placement.reason = "prefill_worker_available";
  return placement;
}

}  // namespace

absl::StatusOr<Placement> PlaceRequest(const RegistrySnapshot& snapshot,
                                       const PlacementQuery& query) {
  // A decode worker that no live prefill worker pairs with (another KV
  // dtype or layout, or another protocol version, as while a pool is rolled
  // over tier by tier) gives way to the next best one. Each round excludes
  // one more worker, so this ends.
  PlacementQuery q = query;
  bool incompatible = false;
  while (true) {
    const WorkerState* chosen = nullptr;
    absl::StatusOr<Placement> placement = PlaceOnBestDecode(snapshot, q, &chosen);
    if (placement.ok()) return placement;
    if (chosen == nullptr || !absl::IsFailedPrecondition(placement.status())) {
      if (!incompatible) return placement.status();
      break;
    }
    incompatible = true;
    q.decode.excluded.push_back(chosen->address);
  }
  // No decode worker pairs with any live prefill worker: the best one
  // prefills the prompt itself rather than the request failing. Its
  // reason, counted in the prefill-decision metric and named in each
  // placement's log line, tells the operator.
  const WorkerState* chosen = nullptr;
  PlacementQuery local = query;
  local.colocated = true;
  local.forced_why = "no prefill worker pairs with any decode worker";
  local.forced_reason = "no_compatible_prefill_worker";
  return PlaceOnBestDecode(snapshot, local, &chosen);
}

}  // namespace pdserve::router
