// The clock seam (snowflake/clock.h): the real clock's readings agree with each other and
// with std::chrono::steady_clock (the heartbeat's unit); the tests' manual clock
// (tests/support/manual_clock.h) moves only when moved, a sleep included, and their
// AheadClock is the real clock until skipped ahead.
#include "snowflake/clock.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "manual_clock.h"

namespace snowflake {
namespace {

using namespace std::chrono_literals;
using testing::AheadClock;
using testing::ManualClock;

// The coarse clock lags the precise one by up to its tick (CoarseLag) while the kernel runs
// the tick on time; under load the tick runs late and the lag grows (here, at load 10:
// median 4 ms, 30% of readings 5-6 ms, against a 4 ms tick). So the lag is judged by its
// lower quartile over many readings spread over the tick: at most CoarseLag. A CoarseLag
// below the tick (1 ms against a 4 ms tick) fails it.
TEST(RealClock, CoarseWallReadingLagsByAtMostItsLag) {
  Clock& sut = Clock::Real();
  constexpr int kReadings = 200;
  std::vector<int64_t> lags;

  for (int i = 0; i < kReadings; ++i) {
    const int64_t coarse_before = sut.CoarseNowUnixMs();
    const int64_t precise = sut.NowUnixMs();
    const int64_t coarse_after = sut.CoarseNowUnixMs();
    const int64_t inline_read = RealCoarseNowUnixMs();
    const int64_t precise_last = sut.NowUnixMs();
    ASSERT_LE(coarse_before, precise) << "the coarse clock ran ahead of the precise one";
    ASSERT_GE(inline_read, coarse_after) << "the inline read is not the clock's";
    ASSERT_LE(inline_read, precise_last) << "the inline read is not the coarse clock";
    lags.push_back(precise - coarse_after);
    // Readings spread over the tick, not 200 within one.
    std::this_thread::sleep_for(std::chrono::microseconds(700));
  }

  std::sort(lags.begin(), lags.end());
  EXPECT_GE(sut.CoarseLag(), 1ms) << "a coarse clock has a tick";
  EXPECT_LE(lags[kReadings / 4], sut.CoarseLag().count())
      << "the coarse clock's lower-quartile lag exceeds its lag " << sut.CoarseLag().count()
      << " ms (worst " << lags.back() << " ms)";
}

TEST(RealClock, NanosecondsAreOnTheMillisecondsClock) {
  Clock& sut = Clock::Real();

  const int64_t ms_before = sut.NowUnixMs();
  const int64_t ns = sut.NowUnixNs();
  const int64_t ms_after = sut.NowUnixMs();

  EXPECT_LE(ms_before, ns / 1'000'000);
  EXPECT_LE(ns / 1'000'000, ms_after);
}

// The segment's heartbeat is a CLOCK_MONOTONIC reading, compared with SteadyNow(): both
// must be std::chrono::steady_clock's.
TEST(RealClock, SteadyNowIsTheSteadyClock) {
  const auto before = std::chrono::steady_clock::now();
  const Clock::SteadyTime sut = Clock::Real().SteadyNow();
  const auto after = std::chrono::steady_clock::now();

  EXPECT_LE(before, sut);
  EXPECT_LE(sut, after);
}

TEST(RealClock, SleepForSleepsAtLeastTheDuration) {
  Clock& sut = Clock::Real();
  const Clock::SteadyTime start = sut.SteadyNow();

  sut.SleepFor(2ms);

  EXPECT_GE(sut.SteadyNow() - start, 2ms);
}

TEST(Clock, DefaultsDeriveFromTheWallMilliseconds) {
  class WallOnly final : public Clock {
   public:
    int64_t NowUnixMs() noexcept override { return 1'700'000'000'123; }
  };
  WallOnly sut;

  EXPECT_EQ(sut.NowUnixNs(), 1'700'000'000'123'000'000);
  EXPECT_EQ(sut.CoarseNowUnixMs(), 1'700'000'000'123);
  EXPECT_EQ(sut.CoarseLag(), 0ms);
}

TEST(ManualClock, StandsStillUntilMoved) {
  ManualClock sut(1'000);
  const Clock::SteadyTime steady = sut.SteadyNow();

  EXPECT_EQ(sut.NowUnixMs(), 1'000);
  EXPECT_EQ(sut.SteadyNow(), steady);
  sut.Tick(5);
  EXPECT_EQ(sut.NowUnixMs(), 1'005);
  EXPECT_EQ(sut.CoarseNowUnixMs(), 1'005);
  EXPECT_EQ(sut.NowUnixNs(), 1'005'000'000);
  EXPECT_EQ(sut.SteadyNow() - steady, 5ms);
}

TEST(ManualClock, AStepOfTheWallIsNotTimePassing) {
  ManualClock sut(1'000);
  const Clock::SteadyTime steady = sut.SteadyNow();

  EXPECT_EQ(sut.Advance(-300), 700);
  sut.Set(5'000);

  EXPECT_EQ(sut.NowUnixMs(), 5'000);
  EXPECT_EQ(sut.SteadyNow(), steady);
}

TEST(ManualClock, ASleepMovesBothClocksToItsEndAtOnce) {
  ManualClock sut(1'000);
  const Clock::SteadyTime start = sut.SteadyNow();
  const auto real_start = std::chrono::steady_clock::now();

  sut.SleepFor(1h);
  sut.SleepUntil(start);  // in the past: no move
  sut.SleepFor(100us);

  EXPECT_EQ(sut.SteadyNow() - start, 1h + 100us);
  EXPECT_EQ(sut.NowUnixNs(), 1'000'000'000 + 3'600'000'100'000);
  EXPECT_EQ(sut.NowUnixMs(), 3'601'000);
  EXPECT_EQ(sut.sleeps(), 3);
  EXPECT_LT(std::chrono::steady_clock::now() - real_start, 10min) << "it slept for real";
}

TEST(ManualClock, AtRealNowStartsAtTheRealReadings) {
  const int64_t wall_before = Clock::Real().NowUnixMs();
  const Clock::SteadyTime steady_before = Clock::Real().SteadyNow();

  ManualClock sut = ManualClock::AtRealNow();

  EXPECT_GE(sut.NowUnixMs(), wall_before);
  EXPECT_GE(sut.SteadyNow(), steady_before);
  EXPECT_LE(sut.SteadyNow(), Clock::Real().SteadyNow());
}

TEST(AheadClock, ReadsTheRealClockUntilSkippedAndThenThatMuchLater) {
  AheadClock sut;

  const int64_t wall_before = Clock::Real().NowUnixMs();
  const int64_t coarse_before = Clock::Real().CoarseNowUnixMs();
  const Clock::SteadyTime steady_before = Clock::Real().SteadyNow();
  const int64_t unskipped = sut.NowUnixMs();
  const Clock::SteadyTime unskipped_steady = sut.SteadyNow();
  sut.Skip(300ms);
  const int64_t skipped = sut.NowUnixMs();
  const int64_t skipped_coarse = sut.CoarseNowUnixMs();
  const Clock::SteadyTime skipped_steady = sut.SteadyNow();
  const int64_t wall_after = Clock::Real().NowUnixMs();
  const int64_t coarse_after = Clock::Real().CoarseNowUnixMs();
  const Clock::SteadyTime steady_after = Clock::Real().SteadyNow();

  EXPECT_GE(unskipped, wall_before);
  EXPECT_LE(unskipped_steady, steady_after) << "ahead of the real clock before any skip";
  EXPECT_GE(unskipped_steady, steady_before);
  EXPECT_GE(skipped, wall_before + 300);
  EXPECT_LE(skipped, wall_after + 300);
  // Against the real coarse readings, not the precise ones less the lag: a tick the
  // kernel runs late must not fail a test of the skip.
  EXPECT_GE(skipped_coarse, coarse_before + 300);
  EXPECT_LE(skipped_coarse, coarse_after + 300);
  EXPECT_GE(skipped_steady, steady_before + 300ms);
  EXPECT_LE(skipped_steady, steady_after + 300ms);
}

}  // namespace
}  // namespace snowflake
