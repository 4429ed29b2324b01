// Clock: where the router's request state machine reads the time, so that
// its deadlines, backoffs and watchdog verdicts can be tested without
// sleeping (a test advances its own clock).
//
// Thread-safe: SystemClock has no state; an implementation shared by calls
// must be safe to read from any thread.
#ifndef PDSERVE_ROUTER_CALL_CLOCK_H_
#define PDSERVE_ROUTER_CALL_CLOCK_H_

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace pdserve::router {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
};

// The wall clock (absl::Now).
class SystemClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
};

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_CALL_CLOCK_H_
