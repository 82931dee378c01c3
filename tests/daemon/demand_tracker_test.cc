#include "daemon/core/demand_tracker.h"

#include <gtest/gtest.h>

namespace snowflake::daemon {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

TEST(DemandTracker, IdleKeepsMinFill) {
  DemandTracker sut(64, 4096);

  sut.Record(DemandTracker::TimePoint{}, 0);

  EXPECT_EQ(sut.target(), 64u);
}

TEST(DemandTracker, TargetIsTwiceThePeakMillisecondClampedToCapacity) {
  // Arrange
  DemandTracker sut(64, 4096);
  const DemandTracker::TimePoint t0{};

  // Act / Assert: two passes in one millisecond add up.
  sut.Record(t0, 300);
  sut.Record(t0 + microseconds(500), 200);
  EXPECT_EQ(sut.target(), 1000u);
  sut.Record(t0 + milliseconds(2), 5000);
  EXPECT_EQ(sut.target(), 4096u);
}

TEST(DemandTracker, APeakIsRememberedForTheWholeWindow) {
  DemandTracker sut(64, 4096);
  const DemandTracker::TimePoint t0{};
  sut.Record(t0, 1000);
  sut.Record(t0 + milliseconds(1), 10);

  sut.Record(t0 + milliseconds(999), 0);

  EXPECT_EQ(sut.target(), 2000u);
}

TEST(DemandTracker, OldDemandLeavesTheWindow) {
  DemandTracker sut(64, 4096);
  const DemandTracker::TimePoint t0{};
  sut.Record(t0, 1000);
  sut.Record(t0 + milliseconds(500), 100);

  sut.Record(t0 + milliseconds(1001), 10);

  EXPECT_EQ(sut.target(), 200u);
}

TEST(DemandTracker, ALaterLargerPeakReplacesAnEarlierSmallerOne) {
  DemandTracker sut(1, 4096);
  const DemandTracker::TimePoint t0{};
  sut.Record(t0, 100);
  sut.Record(t0 + milliseconds(10), 300);
  sut.Record(t0 + milliseconds(20), 50);

  sut.Record(t0 + milliseconds(1005), 0);  // the 100 has left; 300 and 50 remain

  EXPECT_EQ(sut.target(), 600u);
}

TEST(DemandTracker, AHintCountsAsTheDemandOfItsMillisecond) {
  DemandTracker sut(64, 2048);
  const DemandTracker::TimePoint t0{};

  sut.Record(t0, 0, 4096);

  EXPECT_EQ(sut.target(), 2048u) << "a batch of 4,096 that asked raises the target at once";
}

TEST(DemandTracker, AHintAndTheTakesItLeadsToAreNotCountedTwice) {
  DemandTracker sut(64, 1'000'000);
  const DemandTracker::TimePoint t0{};

  sut.Record(t0, 0, 1000);
  sut.Record(t0 + microseconds(300), 1000);

  EXPECT_EQ(sut.target(), 2000u);
}

TEST(DemandTracker, RepeatedBigBatchesKeepTheTargetUpAndItFallsBackWhenTheyStop) {
  DemandTracker sut(64, 2048);
  const DemandTracker::TimePoint t0{};
  for (int i = 0; i < 10; ++i) sut.Record(t0 + milliseconds(100 * i), 0, 4096);
  EXPECT_EQ(sut.target(), 2048u);

  sut.Record(t0 + milliseconds(900 + 1001), 0);

  EXPECT_EQ(sut.target(), 64u);
}

}  // namespace
}  // namespace snowflake::daemon
