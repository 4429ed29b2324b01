// Directories of a test binary's own under the temp directory. The temp
// directory is shared by every run on the machine (two checkouts, CI beside
// a developer's run), so files at fixed names there collide: one run
// overwrites or deletes another's certificates, models or logs, or finds
// them half-written. Every directory here is made by mkdtemp(), so its name
// is unique to the process that made it.
//
// A directory is removed with everything in it when it goes, unless a test
// of the binary has failed by then: its logs are what a failure is
// diagnosed from, so it is kept and its path printed.
#ifndef PDSERVE_TESTS_TESTING_TEMP_DIR_H_
#define PDSERVE_TESTS_TESTING_TEMP_DIR_H_

#include <stdlib.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>

#include "gtest/gtest.h"

namespace pdserve::testing {

// A fresh directory, <temp>/pdserve-<name>-XXXXXX, removed when this object
// is destroyed. <temp> is gtest's TempDir() ($TEST_TMPDIR, else /tmp).
class ScopedTempDir {
 public:
  explicit ScopedTempDir(const std::string& name) : path_(Make(name)) {}
  ~ScopedTempDir() {
    if (::testing::Test::HasFailure() || ::testing::UnitTest::GetInstance()->Failed()) {
      std::fprintf(stderr, "[temp_dir] a test failed: keeping %s\n", path_.c_str());
      return;
    }
    std::error_code ignored;  // a leftover is harmless: its name is unique
    std::filesystem::remove_all(path_, ignored);
  }

  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;

  const std::string& path() const { return path_; }
  // The path of `name` inside the directory.
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  static std::string Make(const std::string& name) {
    std::string base = ::testing::TempDir();
    if (base.empty() || base.back() != '/') base += '/';
    std::string path = base + "pdserve-" + name + "-XXXXXX";
    if (mkdtemp(path.data()) == nullptr) {
      // Nothing a test does without its directory would mean anything.
      std::perror(("mkdtemp " + path).c_str());
      std::abort();
    }
    return path;
  }

  const std::string path_;
};

// The directory of `name` for the whole test binary: made on the first call,
// the same path on every later call with that name in this process (a
// cluster's log directory, which the test reads again later, or a model a
// fixture writes once for all its tests), removed at the binary's exit.
inline std::string TestTempDir(const std::string& name) {
  // A function-local static, so that its destructor removes the
  // directories at exit, after every test (and fixture) has finished.
  static struct {
    std::mutex mu;
    std::map<std::string, std::unique_ptr<ScopedTempDir>> dirs;
  } registry;
  std::lock_guard<std::mutex> lock(registry.mu);
  std::unique_ptr<ScopedTempDir>& dir = registry.dirs[name];
  if (dir == nullptr) dir = std::make_unique<ScopedTempDir>(name);
  return dir->path();
}

}  // namespace pdserve::testing

#endif  // PDSERVE_TESTS_TESTING_TEMP_DIR_H_
