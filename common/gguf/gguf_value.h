// GgufValue, one GGUF metadata value, with its decoding and typed
// conversions. Shared by the GgufFile parser and its typed getters so the
// widening rules ("any integer type whose value fits") live in one place.
// Stateless functions; safe from any thread.
#ifndef PDSERVE_COMMON_GGUF_GGUF_VALUE_H_
#define PDSERVE_COMMON_GGUF_GGUF_VALUE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace pdserve {

// On-disk metadata value types (enum gguf_type).
enum class GgufValueType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

// One metadata value. Scalars are widened into the matching field; strings
// and arrays reference the mapping (valid as long as the GgufFile lives).
struct GgufValue {
  GgufValueType type = GgufValueType::kU8;
  uint64_t u = 0;   // unsigned integers and bool
  int64_t i = 0;    // signed integers
  double f = 0.0;   // floats
  std::string_view str;  // kString
  // kArray: element type, count, and where the packed elements start. For
  // string arrays `strings` holds every element; numeric arrays are decoded
  // on demand from `array_data` (little-endian, possibly unaligned).
  GgufValueType elem_type = GgufValueType::kU8;
  uint64_t count = 0;
  const uint8_t* array_data = nullptr;
  std::vector<std::string_view> strings;
};

// "u8", "i32", "string", ... for errors; "unknown" outside the enum.
const char* GgufValueTypeName(GgufValueType type);

// Encoded size of a scalar type; 0 for kString and kArray (variable size).
uint64_t GgufScalarSize(GgufValueType type);

// "u32", "array of string", ... for errors.
std::string GgufValueDescription(const GgufValue& v);

// Decodes one little-endian scalar of `type` at `p` (GgufScalarSize(type)
// readable bytes) into out->u / out->i / out->f. No-op for strings/arrays.
void DecodeGgufScalar(GgufValueType type, const uint8_t* p, GgufValue* out);

// Conversions behind GgufFile's getters. Errors are INVALID_ARGUMENT and
// describe the value only; the caller adds the key.
absl::StatusOr<uint64_t> GgufValueToUint(const GgufValue& v);
absl::StatusOr<int64_t> GgufValueToInt(const GgufValue& v);
absl::StatusOr<double> GgufValueToFloat(const GgufValue& v);
absl::StatusOr<bool> GgufValueToBool(const GgufValue& v);
absl::StatusOr<std::string_view> GgufValueToString(const GgufValue& v);
absl::StatusOr<std::vector<std::string_view>> GgufArrayToStrings(const GgufValue& v);
absl::StatusOr<std::vector<int64_t>> GgufArrayToInts(const GgufValue& v);
absl::StatusOr<std::vector<double>> GgufArrayToFloats(const GgufValue& v);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_GGUF_GGUF_VALUE_H_
