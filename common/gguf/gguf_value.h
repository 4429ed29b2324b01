// Decoding and typed conversion of GGUF metadata values (GgufValue, declared
// in gguf_file.h). Shared by the GgufFile parser and its typed getters so the
// widening rules ("any integer type whose value fits") live in one place.
// Stateless functions; safe from any thread.
#ifndef PDSERVE_COMMON_GGUF_GGUF_VALUE_H_
#define PDSERVE_COMMON_GGUF_GGUF_VALUE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/gguf/gguf_file.h"

namespace pdserve {

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
