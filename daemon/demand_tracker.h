// How many IDs the ring should hold: about what recent demand needs (DESIGN.md section 4,
// "Freshness"). The target is twice the IDs taken within the last `window`, clamped to
// [min_fill, capacity]: enough to absorb a burst until the next refill, few enough that
// IDs are fresh when taken and the ring never hides a clock problem for long.
//
// A DemandTracker is not safe for concurrent use: the fill loop owns it.

#ifndef SNOWFLAKE_DAEMON_DEMAND_TRACKER_H_
#define SNOWFLAKE_DAEMON_DEMAND_TRACKER_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <utility>

namespace snowflake {

class DemandTracker {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  // REQUIRES: 1 <= min_fill <= capacity.
  DemandTracker(uint64_t min_fill, uint64_t capacity,
                std::chrono::nanoseconds window = std::chrono::milliseconds(2));

  // `taken`: IDs clients took since the previous call (drains excluded).
  void Record(TimePoint now, uint64_t taken);
  // The fill target as of the last Record().
  uint64_t target() const noexcept { return target_; }

 private:
  uint64_t min_fill_;
  uint64_t capacity_;
  std::chrono::nanoseconds window_;
  std::deque<std::pair<TimePoint, uint64_t>> samples_;
  uint64_t in_window_ = 0;
  uint64_t target_;
};

}  // namespace snowflake

#endif  // SNOWFLAKE_DAEMON_DEMAND_TRACKER_H_
