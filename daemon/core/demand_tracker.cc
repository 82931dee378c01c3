#include "daemon/core/demand_tracker.h"

#include <algorithm>

#include "util/debug_assert.h"

namespace snowflake::daemon {

DemandTracker::DemandTracker(uint64_t min_fill, uint64_t max_fill,
                             std::chrono::milliseconds window)
    : min_fill_(min_fill),
      max_fill_(max_fill),
      window_ms_(std::max<int64_t>(window.count(), 1)),
      target_(min_fill) {
  SNOWFLAKE_REQUIRE(1 <= min_fill && min_fill <= max_fill);
  SNOWFLAKE_REQUIRE(window.count() >= 1);
}

void DemandTracker::Record(TimePoint now, uint64_t taken, uint64_t hinted) {
  const int64_t ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  if (ms != current_.ms) {
    // The current millisecond is over: it joins the window's peaks.
    if (current_.taken > 0) {
      while (!peaks_.empty() && peaks_.back().taken <= current_.taken) peaks_.pop_back();
      peaks_.push_back(current_);
    }
    current_ = Bucket{.ms = ms, .taken = 0};
    current_taken_ = 0;
    current_hinted_ = 0;
  }
  // A hint and the takes it leads to are the same demand: count the larger, not both.
  current_taken_ += taken;
  current_hinted_ = std::max(current_hinted_, hinted);
  current_.taken = std::max(current_taken_, current_hinted_);
  while (!peaks_.empty() && peaks_.front().ms <= ms - window_ms_) peaks_.pop_front();
  const uint64_t peak = std::max(current_.taken, peaks_.empty() ? 0 : peaks_.front().taken);
  target_ = std::clamp<uint64_t>(peak * 2, min_fill_, max_fill_);
}

}  // namespace snowflake::daemon
