// A file's whole contents for tests that check what a process wrote
// (logs, certificates, fixtures).
#ifndef PDSERVE_TESTS_TESTING_FILE_CONTENTS_H_
#define PDSERVE_TESTS_TESTING_FILE_CONTENTS_H_

#include <fstream>
#include <iterator>
#include <string>

namespace pdserve::testing {

// The bytes of `path`, or "" where it cannot be read: the caller's
// expectations on the contents then fail and name what was missing.
inline std::string FileContents(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

}  // namespace pdserve::testing

#endif  // PDSERVE_TESTS_TESTING_FILE_CONTENTS_H_
