#include "daemon/core/clock.h"

#include <time.h>

namespace snowflake::daemon {

Clock::~Clock() = default;

int64_t RealClock::NowUnixMs() noexcept {
  timespec ts{};
  // CLOCK_REALTIME cannot fail with a valid clock id and a valid pointer.
  clock_gettime(CLOCK_REALTIME, &ts);
  // tv_nsec is always in [0, 1e9), so this floors even for times before 1970.
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

int64_t RealClock::NowUnixNs() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace snowflake::daemon
