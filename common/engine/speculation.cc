#include "common/engine/speculation.h"

#include <algorithm>

namespace pdserve {

std::string_view DraftSourceName(DraftSource s) {
  switch (s) {
    case DraftSource::kNone: return "none";
    case DraftSource::kPromptLookup: return "prompt_lookup";
    case DraftSource::kSuffixCache: return "suffix_cache";
  }
  return "unknown";
}

double RowPriceThreshold(double per_row_seconds, double step_seconds, int32_t decoding) {
  if (decoding <= 0 || step_seconds <= 0) return 1.0;
  return std::clamp(per_row_seconds / (step_seconds / decoding), 0.0, 1.0);
}

int32_t WorthwhileDraftLength(double keep_rate, double threshold, int32_t max_len) {
  int32_t j = 0;
  for (double p = keep_rate; j < max_len && p > threshold; p *= keep_rate) ++j;
  return j;
}

}  // namespace pdserve
