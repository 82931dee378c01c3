// How many IDs the ring should hold: about what recent demand needs (docs/design.md §4,
// "Freshness"). The demand of a millisecond is the IDs taken in it, or the largest
// refill hint a batch taker gave in it if that is more (a batch of 4,096 that found the
// ring empty asked for 4,096 before it took them). The target is twice the largest
// demand of one millisecond during the
// last `window` (one second by default), clamped to [min_fill, max_fill]: a client that
// takes in bursts finds its burst waiting, and a quiet host's ring stays small, so the
// daemon's work follows demand. Freshness itself is the drain's job (max_age_ms), not the
// target's: every pass drains IDs that became too old, whatever the target.
//
// A DemandTracker is not safe for concurrent use: the fill loop owns it.

#ifndef SNOWFLAKE_DAEMON_CORE_DEMAND_TRACKER_H_
#define SNOWFLAKE_DAEMON_CORE_DEMAND_TRACKER_H_

#include <chrono>
#include <cstdint>
#include <deque>

namespace snowflake::daemon {

class DemandTracker {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  // REQUIRES: 1 <= min_fill <= max_fill; window >= 1 ms.
  DemandTracker(uint64_t min_fill, uint64_t max_fill,
                std::chrono::milliseconds window = std::chrono::seconds(1));

  // `taken`: IDs clients took since the previous call (drains excluded). `hinted`: the
  // refill hint read since the previous call (how many IDs batch takers said they still
  // need; 0 if none). Calls must come in time order.
  void Record(TimePoint now, uint64_t taken, uint64_t hinted = 0);
  // The fill target as of the last Record().
  uint64_t target() const noexcept { return target_; }

 private:
  struct Bucket {
    int64_t ms;      // steady-clock millisecond
    uint64_t taken;  // its demand: IDs taken in it, or its largest hint if more
  };

  uint64_t min_fill_;
  uint64_t max_fill_;
  int64_t window_ms_;
  // Finished buckets of the window with decreasing `taken` (a sliding-window maximum):
  // the front is the peak. A bucket with a later, larger one behind it can never be the
  // peak again and is dropped.
  std::deque<Bucket> peaks_;
  Bucket current_{.ms = INT64_MIN, .taken = 0};
  uint64_t current_taken_ = 0;   // IDs taken in the current millisecond
  uint64_t current_hinted_ = 0;  // the largest hint in the current millisecond
  uint64_t target_;
};

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_CORE_DEMAND_TRACKER_H_
