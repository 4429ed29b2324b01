// Proves the sanitizer build catches what it is there to catch: a heap
// overflow (ASan), signed overflow (UBSan) and a leak (LSan) each produce a
// report. Built only with PDSERVE_SANITIZE=ON. Reports go to stderr here
// (not to the run's report folder, which must stay empty).
#include <sanitizer/common_interface_defs.h>
#include <sanitizer/lsan_interface.h>

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "gtest/gtest.h"

namespace {

class SanitizerCanaryTest : public ::testing::Test {
 protected:
  void SetUp() override { __sanitizer_set_report_path("stderr"); }
};

volatile int sink;  // results the optimiser must keep

// UBSan would flag the load first (object-size); this one is for ASan.
__attribute__((no_sanitize("undefined"))) void ReadPastEnd(int n) {
  char* p = new char[n];
  std::memset(p, 0, n);
  volatile int i = n;  // opaque to the optimiser
  sink = p[i];         // one byte past the end
  delete[] p;
}

void AddOne(int x) {
  volatile int one = 1;
  sink = x + one;
}

// A malloc'd block whose only reference is disguised, so LSan sees a leak;
// Reveal() gives the pointer back to free it before the exit-time check.
class HiddenBlock {
 public:
  HiddenBlock() {
    void* p = std::malloc(4096);
    std::memset(p, 1, 4096);
    bits_ = reinterpret_cast<uintptr_t>(p) ^ kMask;
  }
  void* Reveal() const { return reinterpret_cast<void*>(bits_ ^ kMask); }

 private:
  static constexpr uintptr_t kMask = 0x5a5a5a5a5a5a5a5aULL;
  volatile uintptr_t bits_;
};

TEST_F(SanitizerCanaryTest, AsanReportsHeapOverflow) {
  EXPECT_DEATH(ReadPastEnd(8), "heap-buffer-overflow");
}

TEST_F(SanitizerCanaryTest, UbsanReportsSignedOverflow) {
  EXPECT_DEATH(AddOne(INT_MAX), "signed integer overflow");
}

TEST_F(SanitizerCanaryTest, LsanReportsALeak) {
  HiddenBlock block;
  EXPECT_NE(__lsan_do_recoverable_leak_check(), 0);
  std::free(block.Reveal());
}

}  // namespace
