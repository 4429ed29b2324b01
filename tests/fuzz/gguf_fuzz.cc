// libFuzzer target for the GGUF reader: any byte string must either parse or
// yield a status, never crash or read outside the buffer. On success every
// metadata value and every tensor's data range is touched, so a length that
// escaped validation shows up as an ASan report here rather than in a kernel.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/gguf/gguf_file.h"

namespace {

// Keeps the compiler from discarding the reads below.
volatile uint64_t g_sink = 0;

void TouchValue(const pdserve::GgufFile& file, const std::string& key) {
  const pdserve::GgufValue* v = file.Find(key);
  g_sink = g_sink + v->u + static_cast<uint64_t>(v->i) + v->str.size();
  for (std::string_view s : v->strings) {
    if (!s.empty())
      g_sink = g_sink + static_cast<uint8_t>(s.front()) + static_cast<uint8_t>(s.back());
  }
  // Each getter decodes the value its own way; errors are expected and fine.
  g_sink = g_sink + file.GetUint(key).ok() + file.GetInt(key).ok() + file.GetFloat(key).ok() +
           file.GetBool(key).ok() + file.GetString(key).ok() + file.GetStringArray(key).ok();
  if (auto ints = file.GetIntArray(key); ints.ok()) {
    for (int64_t x : *ints) g_sink = g_sink + static_cast<uint64_t>(x);
  }
  if (auto floats = file.GetFloatArray(key); floats.ok()) {
    for (double x : *floats) g_sink = g_sink + (x == x);
  }
}

void TouchTensor(const pdserve::GgufFile& file, const pdserve::GgufTensorInfo& t) {
  if (file.FindTensor(t.name) != &t) __builtin_trap();
  if (t.nbytes <= 0 || t.data == nullptr) __builtin_trap();
  g_sink = g_sink + t.data[0] + t.data[t.nbytes - 1];
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = pdserve::GgufFile::FromBuffer(std::string(reinterpret_cast<const char*>(data), size));
  if (!file.ok()) return 0;
  for (const std::string& key : (*file)->keys()) TouchValue(**file, key);
  for (const pdserve::GgufTensorInfo& t : (*file)->tensors()) TouchTensor(**file, t);
  return 0;
}
