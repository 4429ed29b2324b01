// StopMatcher: finds the first occurrence of any stop string in streamed
// text without ever emitting text that later turns out to belong to a stop
// string.
//
// Text that could still be the beginning of a stop string (a suffix of what
// arrived that is a prefix of some stop string) is held back until the next
// piece decides it. On a match, the text before the match is released and
// the stop string itself is not (OpenAI semantics). Stop strings are valid
// UTF-8 and so is every input piece, hence a held-back suffix always starts
// on a character boundary and every released piece is valid UTF-8.
//
// One instance per output stream; not thread-safe.
#ifndef PDSERVE_ROUTER_CALL_STOP_MATCHER_H_
#define PDSERVE_ROUTER_CALL_STOP_MATCHER_H_

#include <string>
#include <string_view>
#include <vector>

namespace pdserve::router {

class StopMatcher {
 public:
  // Empty stop strings are ignored (validation rejects them earlier).
  explicit StopMatcher(std::vector<std::string> stops);

  struct Result {
    std::string text;      // safe to emit now
    bool stopped = false;  // a stop string matched; feed no more text
  };

  // Adds `piece` to the stream. After a result with `stopped`, further calls
  // return nothing.
  Result Push(std::string_view piece);

  // End of stream without a match: everything still held back.
  std::string Flush();

  bool stopped() const { return stopped_; }

 private:
  // Length of the longest suffix of held_ that is a proper prefix of some
  // stop string.
  size_t PartialMatchLength() const;

  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_CALL_STOP_MATCHER_H_
