// GGML tensor element types as stored in GGUF files: ids, block geometry
// and names. This is the single table every reader, kernel and writer
// consults, so the numbers live in exactly one place.
#ifndef PDSERVE_COMMON_GGUF_GGML_TYPE_H_
#define PDSERVE_COMMON_GGUF_GGML_TYPE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace pdserve {

// Values are the on-disk ids (enum ggml_type in ggml.h).
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kBF16 = 30,
};

struct GgmlTypeTraits {
  std::string_view name;
  int64_t block_elems;  // elements per block (1 for plain types)
  int64_t block_bytes;  // bytes per block
};

// Returns nullptr for ids this build does not know (including removed ones).
const GgmlTypeTraits* FindGgmlTypeTraits(uint32_t id);

// The id of a type name ("Q4_K", case-insensitive); INVALID_ARGUMENT for
// names this build does not know.
absl::StatusOr<uint32_t> GgmlTypeFromName(std::string_view name);

// Name for logs and errors; "unknown(<id>)" style for unsupported ids.
std::string GgmlTypeName(uint32_t id);

// Bytes of a row of `elems` elements, or -1 when `elems` is not a multiple
// of the block size or the type is unknown.
int64_t GgmlRowBytes(uint32_t id, int64_t elems);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_GGUF_GGML_TYPE_H_
