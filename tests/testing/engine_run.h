// The reference side of the serving tests: one sequence through an
// in-process engine, alone, to its end.
#ifndef PDSERVE_TESTS_TESTING_ENGINE_RUN_H_
#define PDSERVE_TESTS_TESTING_ENGINE_RUN_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "common/engine/engine.h"
#include "common/text/tokenizer.h"
#include "gtest/gtest.h"

namespace pdserve::testing {

// The tokens `engine` produces for `options` until it is idle, without
// end-of-generation tokens (what a served stream carries). An engine error
// fails the test.
inline std::vector<int32_t> RunAlone(Engine& engine, const Tokenizer& tokenizer,
                                     SequenceOptions options) {
  std::vector<int32_t> ids;
  EXPECT_TRUE(engine
                  .Add(std::move(options),
                       [&](const TokenEvent& e) {
                         if (e.token >= 0 && !tokenizer.IsEog(e.token)) ids.push_back(e.token);
                       })
                  .ok());
  while (engine.HasWork()) EXPECT_TRUE(engine.Step().ok());
  return ids;
}

}  // namespace pdserve::testing

#endif  // PDSERVE_TESTS_TESTING_ENGINE_RUN_H_
