// Locates the real SmolLM2 GGUF for tests that need it: models/ under the
// source tree (what `make test` links), else the fetch-model cache. Tests
// GTEST_SKIP() when neither exists, so unit runs work without the file.
#ifndef PDSERVE_TESTS_GOLDEN_TEST_MODEL_H_
#define PDSERVE_TESTS_GOLDEN_TEST_MODEL_H_

#include <cstdlib>
#include <filesystem>
#include <string>

namespace pdserve::testing {

inline std::string SourceDir() {
  const char* s = std::getenv("PDSERVE_SOURCE_DIR");
  return s != nullptr ? s : ".";
}

// `name` under models/ or the fetch-model cache; "" when neither has it.
inline std::string RealModelPath(const std::string& name = "SmolLM2-135M-Instruct.Q4_1.gguf") {
  const std::string in_tree = SourceDir() + "/models/" + name;
  if (std::filesystem::exists(in_tree)) return in_tree;
  const char* home = std::getenv("HOME");
  if (home != nullptr) {
    const std::string cached = std::string(home) + "/.cache/pdserve/models/" + name;
    if (std::filesystem::exists(cached)) return cached;
  }
  return "";
}

}  // namespace pdserve::testing

#endif  // PDSERVE_TESTS_GOLDEN_TEST_MODEL_H_
