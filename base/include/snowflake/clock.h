// Time as the code reads it: the one seam for every clock read and every sleep, from shm/
// up through libsnowflake, the register and the daemon (the way LevelDB runs its whole
// stack on one Env). Code that reads the time or sleeps is given a Clock; a judgement
// (is this heartbeat fresh? is this ID too old?) takes `now` as an argument and stays
// pure. Tests give a clock they move by hand (tests/support/manual_clock.h), so an age is
// a step of that clock, not a wait.
//
// Two clocks in one interface:
// - the wall clock (CLOCK_REALTIME): the time inside an ID, comparable across hosts and
//   reboots; it may step backwards;
// - the monotonic clock (CLOCK_MONOTONIC, which is what std::chrono::steady_clock reads
//   on Linux): intervals, deadlines and sleeps, and the segment's heartbeat. It never
//   goes back, and it restarts at every boot.
//
// A Clock is safe for concurrent use by multiple threads without external
// synchronization: one is shared by a daemon's threads, or by every thread of a Client.

#ifndef SNOWFLAKE_CLOCK_H_
#define SNOWFLAKE_CLOCK_H_

#include <time.h>

#include <chrono>
#include <cstdint>

namespace snowflake {

class Clock {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;

  virtual ~Clock();

  // The real clock, shared by the whole process: libc's clock_gettime() (never a raw
  // system call, so libfaketime's LD_PRELOAD intercepts it in the clock-fault tests) and
  // a real sleep. Stateless; never destroyed.
  static Clock& Real() noexcept;

  // Milliseconds since 1970-01-01T00:00:00Z (truncated towards minus infinity). May go
  // backwards between calls.
  virtual int64_t NowUnixMs() noexcept = 0;

  // Nanoseconds since 1970 on the same clock as NowUnixMs(), for sleeping until a
  // millisecond boundary. The default has millisecond resolution: NowUnixMs() * 10^6.
  virtual int64_t NowUnixNs() noexcept;

  // The wall clock read cheaply (CLOCK_REALTIME_COARSE, through the vDSO): it lags
  // NowUnixMs() by up to CoarseLag(). The default is NowUnixMs(), with no lag.
  virtual int64_t CoarseNowUnixMs() noexcept;
  // How far CoarseNowUnixMs() may lag the wall clock: its resolution, rounded up to a
  // millisecond. The default is zero.
  virtual std::chrono::milliseconds CoarseLag() noexcept;

  // The monotonic clock, for intervals, deadlines and heartbeats; never the time inside an
  // ID. The default reads CLOCK_MONOTONIC.
  virtual SteadyTime SteadyNow() noexcept;

  // Returns once SteadyNow() has reached `deadline` (at once if it has). The default
  // sleeps for real: a clock that overrides SteadyNow() overrides this too, so that a
  // sleep and the clock it is measured on agree.
  virtual void SleepUntil(SteadyTime deadline) noexcept;
  // SleepUntil(SteadyNow() + duration).
  void SleepFor(std::chrono::nanoseconds duration) noexcept {
    SleepUntil(SteadyNow() + std::chrono::duration_cast<SteadyTime::duration>(duration));
  }
};

// What Clock::Real().CoarseNowUnixMs() returns, inline: for a hot path that keeps the real
// clock's read free of a virtual call (RingConsumer's takes) and goes through the Clock
// only when it was given another one.
inline int64_t RealCoarseNowUnixMs() noexcept {
  timespec now{};
  clock_gettime(CLOCK_REALTIME_COARSE, &now);
  // tv_nsec is always in [0, 1e9), so this floors even for times before 1970.
  return static_cast<int64_t>(now.tv_sec) * 1000 + now.tv_nsec / 1'000'000;
}

// A monotonic time as nanoseconds since the clock's zero (for CLOCK_MONOTONIC: the boot),
// the unit the segment's heartbeat is stored in.
inline int64_t SteadyNs(Clock::SteadyTime time) noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(time.time_since_epoch()).count();
}

}  // namespace snowflake

#endif  // SNOWFLAKE_CLOCK_H_
