// A Clock that reads whatever the test sets. Safe for concurrent use: the reading is one
// atomic, so one thread may step it while another (a fill loop) reads it.

#ifndef SNOWFLAKE_TESTS_DAEMON_FAKE_CLOCK_H_
#define SNOWFLAKE_TESTS_DAEMON_FAKE_CLOCK_H_

#include <atomic>
#include <chrono>
#include <cstdint>

#include "daemon/core/clock.h"

namespace snowflake::testing {

class FakeClock final : public daemon::Clock {
 public:
  explicit FakeClock(int64_t unix_ms = 0) noexcept : now_ms_(unix_ms) {}

  int64_t NowUnixMs() noexcept override {
    reads_.fetch_add(1, std::memory_order_relaxed);  // a statistic only
    // seq_cst: a test that sets the clock and then calls into the code under test in
    // another thread expects that thread to see the new reading.
    return now_ms_.load();
  }

  void Set(int64_t unix_ms) noexcept { now_ms_.store(unix_ms); }
  // Moves the clock by delta_ms (negative: backwards). Returns the new reading.
  int64_t Advance(int64_t delta_ms) noexcept { return now_ms_.fetch_add(delta_ms) + delta_ms; }

  // Time passing normally: the wall clock and the steady clock both move by ms.
  void Tick(int64_t ms) noexcept {
    now_ms_.fetch_add(ms);
    steady_ns_.fetch_add(ms * 1'000'000);
  }
  // The steady clock only moves by Tick(): a step of the wall clock (Advance, Set) is
  // then a step, not time passing.
  std::chrono::steady_clock::time_point SteadyNow() noexcept override {
    const int64_t ns = steady_ns_.load();
    // After the load: a read counted after a Tick() saw it.
    steady_reads_.fetch_add(1);
    return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(ns));
  }

  // How many times NowUnixMs() was called: lets tests check the clock is read at most
  // once per millisecond.
  int64_t reads() const noexcept { return reads_.load(std::memory_order_relaxed); }
  // How many times SteadyNow() was called: a test waits for a thread's next few
  // judgements on this clock instead of sleeping and hoping it made them.
  int64_t steady_reads() const noexcept { return steady_reads_.load(); }

 private:
  std::atomic<int64_t> now_ms_;
  std::atomic<int64_t> reads_{0};
  std::atomic<int64_t> steady_reads_{0};
  std::atomic<int64_t> steady_ns_{int64_t{1'000'000'000'000}};
};

}  // namespace snowflake::testing

#endif  // SNOWFLAKE_TESTS_DAEMON_FAKE_CLOCK_H_
