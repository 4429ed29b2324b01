#include "common/gguf/ggml_type.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace pdserve {
namespace {

struct Entry {
  uint32_t id;
  GgmlTypeTraits traits;
};

constexpr Entry kTable[] = {
    {0, {"F32", 1, 4}},       {1, {"F16", 1, 2}},       {2, {"Q4_0", 32, 18}},
    {3, {"Q4_1", 32, 20}},    {6, {"Q5_0", 32, 22}},    {7, {"Q5_1", 32, 24}},
    {8, {"Q8_0", 32, 34}},    {9, {"Q8_1", 32, 36}},    {10, {"Q2_K", 256, 84}},
    {11, {"Q3_K", 256, 110}}, {12, {"Q4_K", 256, 144}}, {13, {"Q5_K", 256, 176}},
    {14, {"Q6_K", 256, 210}}, {15, {"Q8_K", 256, 292}}, {24, {"I8", 1, 1}},
    {25, {"I16", 1, 2}},      {26, {"I32", 1, 4}},      {27, {"I64", 1, 8}},
    {28, {"F64", 1, 8}},      {30, {"BF16", 1, 2}},
};

}  // namespace

const GgmlTypeTraits* FindGgmlTypeTraits(uint32_t id) {
  for (const Entry& e : kTable) {
    if (e.id == id) return &e.traits;
  }
  return nullptr;
}

absl::StatusOr<uint32_t> GgmlTypeFromName(std::string_view name) {
  for (const Entry& e : kTable) {
    if (absl::EqualsIgnoreCase(absl::string_view(e.traits.name.data(), e.traits.name.size()),
                               absl::string_view(name.data(), name.size()))) {
      return e.id;
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown GGML type '", absl::string_view(name.data(), name.size()), "'"));
}

std::string GgmlTypeName(uint32_t id) {
  const GgmlTypeTraits* t = FindGgmlTypeTraits(id);
  if (t == nullptr) return absl::StrCat("unknown(", id, ")");
  return std::string(t->name);
}

int64_t GgmlRowBytes(uint32_t id, int64_t elems) {
  const GgmlTypeTraits* t = FindGgmlTypeTraits(id);
  if (t == nullptr || elems < 0 || elems % t->block_elems != 0) return -1;
  // Guard the multiplication: GGUF dims come from untrusted files.
  if (elems / t->block_elems > INT64_MAX / t->block_bytes) return -1;
  return elems / t->block_elems * t->block_bytes;
}

}  // namespace pdserve
