// The checker on hand-made inputs, before any test trusts it (LevelDB's
// ConcurrentWithoutThreads): each property holds on a good input and fails on a bad one.

#include "id_checker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace snowflake::testing {
namespace {

TEST(IdChecker, AcceptsUniqueIncreasingOrderedRecords) {
  IdChecker sut;
  sut.AddRecorder("a", std::vector<TakeRecord>{{1, 0}, {3, 2}, {6, 5}});
  sut.AddRecorder("b", std::vector<TakeRecord>{{2, 1}, {4, 0}, {5, 4}});

  const IdCheckResult result = sut.Check();

  EXPECT_TRUE(result.ok()) << result.Summary();
  EXPECT_EQ(result.ids, 6u);
  EXPECT_EQ(result.recorders, 2u);
}

TEST(IdChecker, AcceptsNoRecords) {
  IdChecker sut;

  const IdCheckResult result = sut.Check();

  EXPECT_TRUE(result.ok());
  EXPECT_EQ(result.ids, 0u);
}

TEST(IdChecker, FailsOnAnIdTakenByTwoRecorders) {
  IdChecker sut;
  sut.AddRecorder("a", std::vector<TakeRecord>{{1, 0}, {7, 0}});
  sut.AddRecorder("b", std::vector<TakeRecord>{{2, 0}, {7, 0}});

  const IdCheckResult result = sut.Check();

  EXPECT_FALSE(result.ok());
  EXPECT_EQ(result.duplicates, 1u);
  EXPECT_EQ(result.not_increasing, 0u);
  EXPECT_EQ(result.order_violations, 0u);
  EXPECT_NE(result.Summary().find("ID 7 taken more than once"), std::string::npos)
      << result.Summary();
}

TEST(IdChecker, FailsOnARepeatWithinOneRecorder) {
  IdChecker sut;
  sut.AddRecorder("a", std::vector<TakeRecord>{{5, 0}, {5, 0}});

  const IdCheckResult result = sut.Check();

  EXPECT_EQ(result.duplicates, 1u);
  EXPECT_EQ(result.not_increasing, 1u);
}

TEST(IdChecker, FailsOnADecreaseWithinOneRecorder) {
  IdChecker sut;
  sut.AddRecorder("a", std::vector<TakeRecord>{{1, 0}, {9, 0}, {4, 0}});
  sut.AddRecorder("b", std::vector<TakeRecord>{{2, 0}});

  const IdCheckResult result = sut.Check();

  EXPECT_FALSE(result.ok());
  EXPECT_EQ(result.not_increasing, 1u);
  EXPECT_EQ(result.duplicates, 0u);
  EXPECT_NE(result.Summary().find("a record 2: ID 4 after 9"), std::string::npos)
      << result.Summary();
}

TEST(IdChecker, DecreasesAcrossRecordersAreAllowed) {
  // Two recorders interleave freely: only each one's own sequence must increase.
  IdChecker sut;
  sut.AddRecorder("a", std::vector<TakeRecord>{{10, 0}, {11, 0}});
  sut.AddRecorder("b", std::vector<TakeRecord>{{1, 0}, {2, 0}});

  EXPECT_TRUE(sut.Check().ok());
}

TEST(IdChecker, FailsWhenALaterTakeGetsASmallerId) {
  // b's take began after a's take of 8 completed (baton 8), yet got 5.
  IdChecker sut;
  sut.AddRecorder("a", std::vector<TakeRecord>{{8, 0}});
  sut.AddRecorder("b", std::vector<TakeRecord>{{5, 8}});

  const IdCheckResult result = sut.Check();

  EXPECT_FALSE(result.ok());
  EXPECT_EQ(result.order_violations, 1u);
  EXPECT_EQ(result.duplicates, 0u);
  EXPECT_EQ(result.not_increasing, 0u);
  EXPECT_NE(result.Summary().find("real-time order"), std::string::npos) << result.Summary();
}

TEST(IdChecker, FailsWhenALaterTakeGetsTheBatonIdItself) {
  IdChecker sut;
  sut.AddRecorder("b", std::vector<TakeRecord>{{8, 8}});

  EXPECT_EQ(sut.Check().order_violations, 1u);
}

TEST(IdChecker, CountsEveryViolationAndKeepsFewExamples) {
  std::vector<TakeRecord> records;
  for (uint64_t i = 0; i < 100; ++i) records.push_back({100 - i, 1000});
  IdChecker sut;
  sut.AddRecorder("a", records);

  const IdCheckResult result = sut.Check();

  EXPECT_EQ(result.not_increasing, 99u);
  EXPECT_EQ(result.order_violations, 100u);
  EXPECT_LE(result.examples.size(), 10u);
}

TEST(RaiseBaton, RaisesButNeverLowers) {
  std::atomic<uint64_t> sut{5};

  RaiseBaton(sut, 9);
  RaiseBaton(sut, 7);

  EXPECT_EQ(sut.load(), 9u);
}

}  // namespace
}  // namespace snowflake::testing
