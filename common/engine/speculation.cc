#include "common/engine/speculation.h"

namespace pdserve {

std::string_view DraftSourceName(DraftSource s) {
  switch (s) {
    case DraftSource::kNone: return "none";
    case DraftSource::kPromptLookup: return "prompt_lookup";
    case DraftSource::kSuffixCache: return "suffix_cache";
  }
  return "unknown";
}

}  // namespace pdserve
