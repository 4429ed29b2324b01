#include "common/engine/speculation.h"

namespace pdserve {

std::string_view DraftSourceName(DraftSource s) {
  switch (s) {
    case DraftSource::kNone: return "none";
    case DraftSource::kPromptLookup: return "prompt_lookup";
  }
  return "unknown";
}

}  // namespace pdserve
