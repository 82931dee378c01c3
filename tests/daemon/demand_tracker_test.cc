#include "demand_tracker.h"

#include <gtest/gtest.h>

namespace snowflake {
namespace {

using std::chrono::milliseconds;

TEST(DemandTracker, IdleKeepsMinFill) {
  DemandTracker sut(64, 4096);

  sut.Record(DemandTracker::TimePoint{}, 0);

  EXPECT_EQ(sut.target(), 64u);
}

TEST(DemandTracker, TargetIsTwiceTheRecentDemandClampedToCapacity) {
  // Arrange
  DemandTracker sut(64, 4096);
  const DemandTracker::TimePoint t0{};

  // Act / Assert
  sut.Record(t0, 300);
  sut.Record(t0 + milliseconds(1), 200);
  EXPECT_EQ(sut.target(), 1000u);
  sut.Record(t0 + milliseconds(2), 5000);
  EXPECT_EQ(sut.target(), 4096u);
}

TEST(DemandTracker, OldDemandLeavesTheWindow) {
  DemandTracker sut(64, 4096);
  const DemandTracker::TimePoint t0{};
  sut.Record(t0, 1000);

  sut.Record(t0 + milliseconds(3), 10);

  EXPECT_EQ(sut.target(), 64u);
}

}  // namespace
}  // namespace snowflake
