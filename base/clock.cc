#include "snowflake/clock.h"

#include <thread>

namespace snowflake {
namespace {

// The system's clocks. Stateless, so one instance serves every thread.
class RealClock final : public Clock {
 public:
  int64_t NowUnixMs() noexcept override {
    timespec now{};
    // CLOCK_REALTIME cannot fail with a valid clock id and a valid pointer.
    clock_gettime(CLOCK_REALTIME, &now);
    // tv_nsec is always in [0, 1e9), so this floors even for times before 1970.
    return static_cast<int64_t>(now.tv_sec) * 1000 + now.tv_nsec / 1'000'000;
  }

  int64_t NowUnixNs() noexcept override {
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    return static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
  }

  int64_t CoarseNowUnixMs() noexcept override { return RealCoarseNowUnixMs(); }

  std::chrono::milliseconds CoarseLag() noexcept override {
    // Read once: the resolution is fixed at boot (CONFIG_HZ).
    static const std::chrono::milliseconds lag = CoarseResolution();
    return lag;
  }

 private:
  static std::chrono::milliseconds CoarseResolution() noexcept {
    timespec resolution{};
    if (clock_getres(CLOCK_REALTIME_COARSE, &resolution) != 0) {
      return std::chrono::milliseconds(10);  // the coarsest tick Linux uses (HZ=100)
    }
    const int64_t ns = static_cast<int64_t>(resolution.tv_sec) * 1'000'000'000 + resolution.tv_nsec;
    return std::chrono::milliseconds((ns + 999'999) / 1'000'000);
  }
};

}  // namespace

Clock::~Clock() = default;

Clock& Clock::Real() noexcept {
  // Leaked on purpose: threads that outlive static destructors at exit may still read it.
  static Clock* const real = new RealClock;
  return *real;
}

int64_t Clock::NowUnixNs() noexcept { return NowUnixMs() * 1'000'000; }

int64_t Clock::CoarseNowUnixMs() noexcept { return NowUnixMs(); }

std::chrono::milliseconds Clock::CoarseLag() noexcept { return std::chrono::milliseconds(0); }

Clock::SteadyTime Clock::SteadyNow() noexcept {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return SteadyTime(std::chrono::seconds(now.tv_sec) + std::chrono::nanoseconds(now.tv_nsec));
}

void Clock::SleepUntil(SteadyTime deadline) noexcept {
  // Relative sleeps on the real monotonic clock (what std::this_thread::sleep_until does
  // for a steady clock), repeated should one end early.
  for (SteadyTime now = Clock::SteadyNow(); now < deadline; now = Clock::SteadyNow()) {
    std::this_thread::sleep_for(deadline - now);
  }
}

}  // namespace snowflake
