// The model the router-edge fuzz targets validate against: a small random
// GGUF (byte-level BPE vocabulary, context 256), written once per process
// into a folder of its own (two runs on one machine never share it) and
// loaded tokenizer-only; its file is gone once mapped. Traps on failure,
// as a fuzz target must.
#ifndef PDSERVE_TESTS_FUZZ_FUZZ_MODEL_H_
#define PDSERVE_TESTS_FUZZ_FUZZ_MODEL_H_

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "common/model/model_card.h"
#include "common/model/random_model.h"

namespace pdserve::fuzz {

inline std::unique_ptr<ModelCard> LoadFuzzModel() {
  RandomModelSpec spec;
  spec.context_length = 256;
  char dir[] = "/tmp/pdserve-fuzz-model-XXXXXX";
  if (mkdtemp(dir) == nullptr) __builtin_trap();
  const std::string path = std::string(dir) + "/model.gguf";
  if (!WriteRandomModelGguf(spec, path).ok()) __builtin_trap();
  auto loaded = ModelCard::Load(path);
  std::remove(path.c_str());  // a mapping outlives its name
  rmdir(dir);
  if (!loaded.ok()) __builtin_trap();
  return std::move(*loaded);
}

}  // namespace pdserve::fuzz

#endif  // PDSERVE_TESTS_FUZZ_FUZZ_MODEL_H_
