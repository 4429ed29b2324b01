#include "common/gguf/gguf_value.h"

#include <cstring>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pdserve {
namespace {

template <typename T>
T Load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

bool IsUnsigned(GgufValueType t) {
  return t == GgufValueType::kU8 || t == GgufValueType::kU16 || t == GgufValueType::kU32 ||
         t == GgufValueType::kU64;
}

bool IsSigned(GgufValueType t) {
  return t == GgufValueType::kI8 || t == GgufValueType::kI16 || t == GgufValueType::kI32 ||
         t == GgufValueType::kI64;
}

bool IsFloat(GgufValueType t) { return t == GgufValueType::kF32 || t == GgufValueType::kF64; }

absl::Status WrongType(const GgufValue& v, absl::string_view want) {
  return absl::InvalidArgumentError(
      absl::StrCat("has type ", GgufValueDescription(v), ", want ", want));
}

bool IsArrayOf(const GgufValue& v, bool (*pred)(GgufValueType)) {
  return v.type == GgufValueType::kArray && pred(v.elem_type);
}

// The element at `index` of a numeric array, decoded like a scalar.
GgufValue ArrayElement(const GgufValue& v, uint64_t index) {
  GgufValue e;
  e.type = v.elem_type;
  DecodeGgufScalar(v.elem_type, v.array_data + index * GgufScalarSize(v.elem_type), &e);
  return e;
}

}  // namespace

const char* GgufValueTypeName(GgufValueType type) {
  static constexpr const char* kNames[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                           "bool", "string", "array", "u64", "i64", "f64"};
  const auto index = static_cast<uint32_t>(type);
  return index < std::size(kNames) ? kNames[index] : "unknown";
}

uint64_t GgufScalarSize(GgufValueType type) {
  switch (type) {
    case GgufValueType::kU8:
    case GgufValueType::kI8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kU16:
    case GgufValueType::kI16:
      return 2;
    case GgufValueType::kU32:
    case GgufValueType::kI32:
    case GgufValueType::kF32:
      return 4;
    case GgufValueType::kU64:
    case GgufValueType::kI64:
    case GgufValueType::kF64:
      return 8;
    case GgufValueType::kString:
    case GgufValueType::kArray:
      return 0;
  }
  return 0;
}

std::string GgufValueDescription(const GgufValue& v) {
  if (v.type != GgufValueType::kArray) return GgufValueTypeName(v.type);
  return absl::StrCat("array of ", GgufValueTypeName(v.elem_type));
}

void DecodeGgufScalar(GgufValueType type, const uint8_t* p, GgufValue* out) {
  switch (type) {
    case GgufValueType::kU8:
      out->u = Load<uint8_t>(p);
      break;
    case GgufValueType::kI8:
      out->i = Load<int8_t>(p);
      break;
    case GgufValueType::kU16:
      out->u = Load<uint16_t>(p);
      break;
    case GgufValueType::kI16:
      out->i = Load<int16_t>(p);
      break;
    case GgufValueType::kU32:
      out->u = Load<uint32_t>(p);
      break;
    case GgufValueType::kI32:
      out->i = Load<int32_t>(p);
      break;
    case GgufValueType::kF32:
      out->f = Load<float>(p);
      break;
    // The spec says 0 or 1; llama.cpp reads any non-zero byte as true.
    case GgufValueType::kBool:
      out->u = Load<uint8_t>(p) != 0;
      break;
    case GgufValueType::kU64:
      out->u = Load<uint64_t>(p);
      break;
    case GgufValueType::kI64:
      out->i = Load<int64_t>(p);
      break;
    case GgufValueType::kF64:
      out->f = Load<double>(p);
      break;
    case GgufValueType::kString:
    case GgufValueType::kArray:
      break;
  }
}

absl::StatusOr<uint64_t> GgufValueToUint(const GgufValue& v) {
  if (IsUnsigned(v.type)) return v.u;
  if (!IsSigned(v.type)) return WrongType(v, "an unsigned integer");
  if (v.i < 0) {
    return absl::InvalidArgumentError(absl::StrCat("value ", v.i, " is negative"));
  }
  return static_cast<uint64_t>(v.i);
}

absl::StatusOr<int64_t> GgufValueToInt(const GgufValue& v) {
  if (IsSigned(v.type)) return v.i;
  if (!IsUnsigned(v.type)) return WrongType(v, "an integer");
  if (v.u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return absl::InvalidArgumentError(absl::StrCat("value ", v.u, " does not fit int64"));
  }
  return static_cast<int64_t>(v.u);
}

absl::StatusOr<double> GgufValueToFloat(const GgufValue& v) {
  if (IsFloat(v.type)) return v.f;
  return WrongType(v, "f32 or f64");
}

absl::StatusOr<bool> GgufValueToBool(const GgufValue& v) {
  if (v.type == GgufValueType::kBool) return v.u != 0;
  return WrongType(v, "bool");
}

absl::StatusOr<std::string_view> GgufValueToString(const GgufValue& v) {
  if (v.type == GgufValueType::kString) return v.str;
  return WrongType(v, "string");
}

absl::StatusOr<std::vector<std::string_view>> GgufArrayToStrings(const GgufValue& v) {
  if (v.type == GgufValueType::kArray && v.elem_type == GgufValueType::kString) return v.strings;
  return WrongType(v, "array of string");
}

// The parser checked that count elements fit in the file, so sizing the
// result by count is bounded by the file size.
absl::StatusOr<std::vector<int64_t>> GgufArrayToInts(const GgufValue& v) {
  if (!IsArrayOf(v, IsUnsigned) && !IsArrayOf(v, IsSigned)) {
    return WrongType(v, "an array of integers");
  }
  std::vector<int64_t> out(v.count);
  for (uint64_t i = 0; i < v.count; ++i) {
    absl::StatusOr<int64_t> e = GgufValueToInt(ArrayElement(v, i));
    if (!e.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("element #", i, ": ", e.status().message()));
    }
    out[i] = *e;
  }
  return out;
}

absl::StatusOr<std::vector<double>> GgufArrayToFloats(const GgufValue& v) {
  if (!IsArrayOf(v, IsFloat)) return WrongType(v, "an array of f32 or f64");
  std::vector<double> out(v.count);
  for (uint64_t i = 0; i < v.count; ++i) out[i] = ArrayElement(v, i).f;
  return out;
}

}  // namespace pdserve
