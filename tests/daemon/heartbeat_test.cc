// The heartbeat thread on a real segment (finding 8): it beats at its own cadence while
// the fill loop is busy or blocked, and stops once the loop has not finished a pass for
// stall_limit, so a hung daemon is still reported. The stall is measured on a manual clock
// the test moves; the beat's cadence is a real condition-variable wait, so the test waits
// for beats and judgements (events), never for a duration.
#include "daemon/core/heartbeat.h"

#include <gtest/gtest.h>

#include <chrono>

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

// Waits until the beat thread has read `clock` `reads` more times: one read per judgement,
// so every judgement counted was made on the clock as it is now.
::testing::AssertionResult Judged(testing::ManualClock& clock, int64_t reads) {
  const int64_t from = clock.steady_reads();
  return WaitUntil([&] { return clock.steady_reads() >= from + reads; }, 10s,
                   "the beat thread's next judgements", 1ms);
}

TEST(Heartbeat, BeatsWhileTheFillLoopIsBusyAndStopsWhenItHangs) {
  // Arrange: a 600 ms stall limit, beats every 5 ms (liveness 50 ms).
  Segment segment;
  testing::ManualClock clock(1'700'000'000'000);
  Heartbeat sut(segment.producer, BeatIntervalFor(50), 600ms, clock);
  sut.NotePass();
  sut.Start();
  const uint64_t before = segment.beat();

  // Act: the loop is busy (no NotePass) for 300 ms, well within the stall limit, and
  // beats go on; then it hangs past the limit, and they stop.
  clock.Tick(300);
  const uint64_t beats_busy = sut.beats();
  const ::testing::AssertionResult beat_on = WaitUntil(
      [&] { return sut.beats() >= beats_busy + 10; }, 10s, "ten beats while the loop is busy", 1ms);
  const uint64_t during = segment.beat();
  clock.Tick(301);
  ASSERT_TRUE(Judged(clock, 2));
  const uint64_t hung = sut.beats();
  const uint64_t hung_beat = segment.beat();
  ASSERT_TRUE(Judged(clock, 5));

  // Assert
  EXPECT_TRUE(beat_on) << "no beats while the loop was busy within the stall limit";
  EXPECT_GT(during, before) << "no beat while the loop was busy";
  EXPECT_EQ(sut.beats(), hung) << "a hung loop still looked alive";
  EXPECT_EQ(segment.beat(), hung_beat) << "a hung loop still beat into the segment";
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
  ASSERT_TRUE(Judged(clock, 2));
  const uint64_t stalled = sut.beats();
  ASSERT_TRUE(Judged(clock, 5));
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
