// The wall clock the generator reads, behind an interface so tests can step it at will.
//
// IDs carry wall-clock (CLOCK_REALTIME) milliseconds: they must be comparable across
// hosts and across reboots, which a monotonic clock is not. The generator therefore has
// to survive this clock stepping backwards; see generator.h.

#ifndef SNOWFLAKE_DAEMON_CORE_CLOCK_H_
#define SNOWFLAKE_DAEMON_CORE_CLOCK_H_

#include <chrono>
#include <cstdint>

namespace snowflake::daemon {

// Implementations must be safe to call from any thread; the generator never assumes two
// readings are ordered.
class Clock {
 public:
  virtual ~Clock();

  // Milliseconds since 1970-01-01T00:00:00Z (truncated towards minus infinity). May go
  // backwards between calls.
  virtual int64_t NowUnixMs() noexcept = 0;

  // Nanoseconds since 1970 on the same clock as NowUnixMs(), for sleeping until a
  // millisecond boundary. The default has millisecond resolution (a fake clock then
  // makes the fill loop wake once per millisecond of real time).
  virtual int64_t NowUnixNs() noexcept { return NowUnixMs() * 1'000'000; }

  // A clock that never goes back, for intervals (demand, dormancy, retry schedules).
  // Never the time inside an ID. The default is std::chrono::steady_clock.
  virtual std::chrono::steady_clock::time_point SteadyNow() noexcept {
    return std::chrono::steady_clock::now();
  }
};

// The system's CLOCK_REALTIME. RealClock is stateless and safe for concurrent use.
//
// It calls clock_gettime() through libc (never a raw syscall) so that libfaketime's
// LD_PRELOAD can intercept it in the clock-fault tests.
class RealClock final : public Clock {
 public:
  int64_t NowUnixMs() noexcept override;
  int64_t NowUnixNs() noexcept override;
};

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_CORE_CLOCK_H_
