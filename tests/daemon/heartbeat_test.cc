// The heartbeat thread on a real segment (finding 8): it beats at its own cadence while
// the fill loop is busy or blocked, and stops once the loop has not finished a pass for
// stall_limit, so a hung daemon is still reported.
#include "daemon/core/heartbeat.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "snowflake/id_layout.h"
#include "temp_dir.h"

namespace snowflake::daemon {
namespace {

using namespace std::chrono_literals;

struct Segment {
  testing::TempDir dir{"heartbeat"};
  shm::RingProducer producer{std::move(
      shm::RingProducer::CreateOrOpen(shm::ProducerOptions{.runtime_dir = dir.path(),
                                                           .capacity = 64,
                                                           .epoch_unix_ms = kDefaultEpochUnixMs,
                                                           .machine = 1,
                                                           .mode = 0600,
                                                           .group = std::nullopt})
          .value())};
  uint64_t beat() const { return producer.header().heartbeat_mono_ns.load(); }
};

TEST(Heartbeat, BeatsWhileTheFillLoopIsBusyAndStopsWhenItHangs) {
  Segment segment;
  Heartbeat sut(segment.producer, BeatIntervalFor(50), 600ms);
  sut.NotePass();
  sut.Start();

  // The loop "blocks" (no NotePass) for 300 ms: well within the stall limit.
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

}  // namespace
}  // namespace snowflake::daemon
