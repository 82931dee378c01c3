// The heartbeat thread on a real segment (finding 8): it beats at its own cadence while
// the fill loop is busy or blocked, and stops once the loop has not finished a pass for
// stall_limit, so a hung daemon is still reported.
#include "daemon/core/heartbeat.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "manual_clock.h"
#include "snowflake/id_layout.h"
#include "temp_dir.h"
#include "test_producer.h"
#include "wait_until.h"

namespace snowflake::daemon {
namespace {

using snowflake::testing::WaitUntil;

using namespace std::chrono_literals;

struct Segment {
  testing::TempDir dir{"heartbeat"};
  shm::RingProducer producer{
      testing::MakeProducer(shm::ProducerOptions{.runtime_dir = dir.path(),
                                                 .capacity = 64,
                                                 .epoch_unix_ms = kDefaultEpochUnixMs,
                                                 .machine = 1,
                                                 .mode = 0600,
                                                 .group = std::nullopt})};
  uint64_t beat() const { return producer.header().heartbeat_mono_ns.load(); }
};

TEST(Heartbeat, BeatsWhileTheFillLoopIsBusyAndStopsWhenItHangs) {
  Segment segment;
  Heartbeat sut(segment.producer, BeatIntervalFor(50), 600ms, Clock::Real());
  sut.NotePass();
  sut.Start();

  // The subject is time itself: the loop "blocks" (no NotePass) for 300 ms, well within
  // the 600 ms stall limit, then hangs for good, past it; no event stands for "a pause".
  const uint64_t before = segment.beat();
  std::this_thread::sleep_for(300ms);
  const uint64_t during = segment.beat();
  const uint64_t beats_during = sut.beats();
  // Then it hangs for good: beats stop after the stall limit.
  std::this_thread::sleep_for(900ms);
  const uint64_t hung = segment.beat();
  std::this_thread::sleep_for(200ms);

  EXPECT_GT(during, before) << "no beat while the loop was busy";
  EXPECT_GE(beats_during, 10u) << "beats every 5 ms, so dozens in 300 ms";
  EXPECT_EQ(segment.beat(), hung) << "a hung loop still looked alive";
  EXPECT_EQ(BeatIntervalFor(50), 5ms);
  EXPECT_EQ(BeatIntervalFor(10), 1ms);
}

TEST(Heartbeat, StallIsMeasuredOnTheInjectedClock) {
  // Arrange: a 10 s stall limit, which real time never reaches during this test.
  Segment segment;
  testing::ManualClock clock(1'700'000'000'000);
  Heartbeat sut(segment.producer, BeatIntervalFor(10), 10s, clock);
  sut.NotePass();
  sut.Start();
  ASSERT_TRUE(WaitUntil([&] { return sut.beats() > 0; }, 10s, "sut.beats() > 0", 1ms))
      << "never beat";

  // Act: the injected steady clock passes the stall limit; real time barely moves. The
  // beat thread reads the clock once a judgement: two reads after the tick, every beat
  // judged before it is counted; five more are five judgements that saw the stall.
  clock.Tick(10'001);
  const auto judged = [&](int64_t reads) {
    const int64_t from = clock.steady_reads();
    return WaitUntil([&] { return clock.steady_reads() >= from + reads; }, 10s,
                     "the beat thread's next judgements", 1ms);
  };
  ASSERT_TRUE(judged(2));
  const uint64_t stalled = sut.beats();
  ASSERT_TRUE(judged(5));
  const uint64_t still_stalled = sut.beats();
  sut.NotePass();  // a pass at the injected clock's new now
  const ::testing::AssertionResult resumed = WaitUntil([&] { return sut.beats() > still_stalled; },
                                                       10s, "sut.beats() > still_stalled", 1ms);

  // Assert
  EXPECT_EQ(still_stalled, stalled) << "beat on although the injected clock says the loop "
                                       "stalled: the stall is not measured on Clock";
  EXPECT_TRUE(resumed) << "no beat after a pass";
}

}  // namespace
}  // namespace snowflake::daemon
