#include "demand_tracker.h"

#include <algorithm>

namespace snowflake {

DemandTracker::DemandTracker(uint64_t min_fill, uint64_t capacity, std::chrono::nanoseconds window)
    : min_fill_(min_fill), capacity_(capacity), window_(window), target_(min_fill) {}

void DemandTracker::Record(TimePoint now, uint64_t taken) {
  if (taken > 0) {
    samples_.emplace_back(now, taken);
    in_window_ += taken;
  }
  while (!samples_.empty() && now - samples_.front().first > window_) {
    in_window_ -= samples_.front().second;
    samples_.pop_front();
  }
  target_ = std::clamp<uint64_t>(in_window_ * 2, min_fill_, capacity_);
}

}  // namespace snowflake
