#include "router/pool/worker_pairing.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pdserve::router {
namespace {

// Window layers included: the two ends must agree on which blocks of a
// window layer travel (KvLayout::FirstSentBlock).
bool SameLayout(const v1::KvLayout& a, const v1::KvLayout& b) {
  return a.num_layers() == b.num_layers() && a.num_kv_heads() == b.num_kv_heads() &&
         a.head_dim() == b.head_dim() && a.block_size() == b.block_size() &&
         a.dtype() == b.dtype() &&
         std::equal(a.layer_window().begin(), a.layer_window().end(), b.layer_window().begin(),
                    b.layer_window().end());
}

}  // namespace

std::string FormatKvLayout(const v1::KvLayout& l) {
  return absl::StrCat("{layers=", l.num_layers(), " kv_heads=", l.num_kv_heads(),
                      " head_dim=", l.head_dim(), " block_size=", l.block_size(),
                      " dtype=", l.dtype(), l.layer_window().empty() ? "" : " windows=",
                      absl::StrJoin(l.layer_window(), ","), "}");
}

absl::Status CheckPairCompatible(const WorkerState& prefill, const WorkerState& decode) {
  const v1::WorkerInfo& p = prefill.info;
  const v1::WorkerInfo& d = decode.info;
  if (p.model_fingerprint() != d.model_fingerprint()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "prefill worker ", prefill.address, " model fingerprint ", p.model_fingerprint(),
        " != decode worker ", decode.address, " ", d.model_fingerprint()));
  }
  if (p.kv_layout().dtype() != d.kv_layout().dtype()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "kv dtype mismatch: prefill worker ", prefill.address, " stores ", p.kv_layout().dtype(),
        " KV, decode worker ", decode.address, " stores ", d.kv_layout().dtype(),
        " KV (start both tiers with the same --kv_dtype)"));
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

}  // namespace pdserve::router
