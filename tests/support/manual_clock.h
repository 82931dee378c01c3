// Clocks a test moves by hand (snowflake/clock.h), for every layer: the daemon's generator
// and fill loop, a Client's deadlines and freshness judgement, the register's leases.
// ManualClock moves only when the test moves it; AheadClock is the real clock plus a
// step the test adds, for tests beside a real daemon. Header only: their users link
// snowflake::base (every library of the project does).
//
// Two readings: the wall clock (ms, stepped by Set()/Advance(), or moved with the steady
// clock by Tick()) and the monotonic clock (ns, moved only by Tick() and by sleeps). A
// sleep never blocks: SleepUntil(deadline) moves both clocks forward to the deadline (if
// it lies ahead) and returns at once, so code that sleeps in a loop until a deadline ends
// its loop without real time passing, and sleeps() says how many it slept. A futex wait
// or a condition variable is not a sleep of this clock: it waits in real time (see the
// users' notes: a test moves the clock, then publishes or wakes).
//
// Safe for concurrent use: each reading is one atomic, so one thread may move the clock
// while another reads it (the wall and the monotonic clock of one Tick() are two stores: a
// reader between them sees one moved and not yet the other).

#ifndef SNOWFLAKE_TESTS_SUPPORT_MANUAL_CLOCK_H_
#define SNOWFLAKE_TESTS_SUPPORT_MANUAL_CLOCK_H_

#include <atomic>
#include <chrono>
#include <cstdint>

#include "snowflake/clock.h"

namespace snowflake::testing {

class ManualClock final : public Clock {
 public:
  // Reads `unix_ms` on the wall clock and `steady` on the monotonic one.
  explicit ManualClock(int64_t unix_ms = 0,
                       SteadyTime steady = SteadyTime(std::chrono::seconds(1000))) noexcept
      : now_ns_(unix_ms * 1'000'000), steady_ns_(SteadyNs(steady)) {}

  // Starts where the real clock is now: for tests that share a segment with real clocks
  // (a heartbeat a daemon stored, IDs of the real millisecond). From then on it stands
  // still until moved; a heartbeat the real clock stores later lies in its future.
  static ManualClock AtRealNow() noexcept {
    return ManualClock(Clock::Real().NowUnixMs(), Clock::Real().SteadyNow());
  }

  int64_t NowUnixMs() noexcept override {
    reads_.fetch_add(1, std::memory_order_relaxed);  // a statistic only
    // seq_cst: a test that sets the clock and then calls into the code under test in
    // another thread expects that thread to see the new reading.
    return FloorMs(now_ns_.load());
  }
  // Millisecond resolution unless a sleep of less than a millisecond moved it.
  int64_t NowUnixNs() noexcept override { return now_ns_.load(); }
  // The same reading as NowUnixMs(): this clock has no coarse lag.
  int64_t CoarseNowUnixMs() noexcept override { return NowUnixMs(); }
  std::chrono::milliseconds CoarseLag() noexcept override { return std::chrono::milliseconds(0); }

  SteadyTime SteadyNow() noexcept override {
    const int64_t ns = steady_ns_.load();
    // After the load: a read counted after a Tick() saw it.
    steady_reads_.fetch_add(1);
    return SteadyTime(std::chrono::nanoseconds(ns));
  }

  // Moves both clocks forward to `deadline` if it lies ahead, at once (see the top).
  void SleepUntil(SteadyTime deadline) noexcept override {
    sleeps_.fetch_add(1);
    const int64_t target = SteadyNs(deadline);
    int64_t steady = steady_ns_.load();
    // Case analysis of the CAS: (1) it wins: the clock moved from `steady` to the
    // deadline, and the wall follows by as much; (2) it loses: another thread moved the
    // clock; `steady` is its new reading, and we move on from there if still short.
    while (steady < target) {
      if (steady_ns_.compare_exchange_weak(steady, target)) {
        now_ns_.fetch_add(target - steady);
        return;
      }
    }
  }

  // Steps the wall clock to unix_ms (time does not pass: the monotonic clock stays).
  void Set(int64_t unix_ms) noexcept { now_ns_.store(unix_ms * 1'000'000); }
  // Steps the wall clock by delta_ms (negative: backwards). Returns the new reading.
  int64_t Advance(int64_t delta_ms) noexcept {
    return FloorMs(now_ns_.fetch_add(delta_ms * 1'000'000) + delta_ms * 1'000'000);
  }
  // Time passing normally: the wall clock and the monotonic clock both move by ms.
  void Tick(int64_t ms) noexcept { Tick(std::chrono::milliseconds(ms)); }
  void Tick(std::chrono::nanoseconds by) noexcept {
    now_ns_.fetch_add(by.count());
    steady_ns_.fetch_add(by.count());
  }

  // How many times NowUnixMs() was called: lets tests check the clock is read at most
  // once per millisecond.
  int64_t reads() const noexcept { return reads_.load(std::memory_order_relaxed); }
  // How many times SteadyNow() was called: a test waits for a thread's next few
  // judgements on this clock instead of sleeping and hoping it made them.
  int64_t steady_reads() const noexcept { return steady_reads_.load(); }
  // How many sleeps the code under test made on this clock.
  int64_t sleeps() const noexcept { return sleeps_.load(); }

 private:
  static int64_t FloorMs(int64_t ns) noexcept {
    return ns >= 0 ? ns / 1'000'000 : (ns - 999'999) / 1'000'000;
  }

  std::atomic<int64_t> now_ns_;     // the wall clock, ns since 1970
  std::atomic<int64_t> steady_ns_;  // the monotonic clock, ns
  std::atomic<int64_t> reads_{0};
  std::atomic<int64_t> steady_reads_{0};
  std::atomic<int64_t> sleeps_{0};
};

// The real clock, ahead by what the test added with Skip(): for a test beside a real
// process (a daemon beating on the real clock) that must age what it sees without waiting.
// Before any Skip() it reads exactly the real clock, so a real daemon's heartbeat is never
// in its future; after one, the wall and the monotonic clock both read that much later,
// and time flows on from there (a sleep sleeps for real). Safe for concurrent use.
class AheadClock final : public Clock {
 public:
  int64_t NowUnixMs() noexcept override { return Clock::Real().NowUnixMs() + SkippedMs(); }
  int64_t NowUnixNs() noexcept override { return Clock::Real().NowUnixNs() + skipped_ns_.load(); }
  int64_t CoarseNowUnixMs() noexcept override {
    return Clock::Real().CoarseNowUnixMs() + SkippedMs();
  }
  std::chrono::milliseconds CoarseLag() noexcept override { return Clock::Real().CoarseLag(); }
  SteadyTime SteadyNow() noexcept override {
    return Clock::Real().SteadyNow() + std::chrono::nanoseconds(skipped_ns_.load());
  }
  void SleepUntil(SteadyTime deadline) noexcept override {
    Clock::Real().SleepUntil(deadline - std::chrono::nanoseconds(skipped_ns_.load()));
  }

  // Moves both clocks `by` ahead of the real ones, for good.
  void Skip(std::chrono::milliseconds by) noexcept {
    skipped_ns_.fetch_add(std::chrono::nanoseconds(by).count());
  }

 private:
  int64_t SkippedMs() const noexcept { return skipped_ns_.load() / 1'000'000; }

  std::atomic<int64_t> skipped_ns_{0};
};

}  // namespace snowflake::testing

#endif  // SNOWFLAKE_TESTS_SUPPORT_MANUAL_CLOCK_H_
