// IdShare (daemon/http/id_share.h) alone, over a time the test sets: the property is that
// over any T ms the front admits at most max_share * 4096 * T IDs plus one bucket and one
// take, and that a client's rate holds apart from the front's share.

#include "daemon/http/id_share.h"

#include <gtest/gtest.h>

#include <chrono>

namespace snowflake::daemon {
namespace {

using namespace std::chrono_literals;
using Verdict = IdShare::Verdict;

TEST(IdShare, AdmitsAtMostItsShareOfTheMachineNumberOverManyMilliseconds) {
  IdShare sut(0.25, 0);
  const auto start = IdShare::Clock::time_point{} + 1h;
  uint64_t admitted = 0;
  uint64_t refused = 0;
  // 10,000 ms, a take of 100 IDs asked every 10 µs: far more than the share.
  for (int step = 0; step < 1'000'000; ++step) {
    const auto now = start + std::chrono::microseconds(step * 10);
    if (sut.Admit("addr:a", 100, now) == Verdict::kAdmitted) {
      admitted += 100;
    } else {
      ++refused;
    }
  }
  const double share = 0.25 * 4096 * 10'000;
  EXPECT_LE(admitted, share + 0.25 * 4096 + 100);
  EXPECT_GE(admitted, share - 100);  // and it does hand out its share
  EXPECT_GT(refused, 0u);
}

TEST(IdShare, ATakeLargerThanTheBucketIsServedAtTheAverageRate) {
  IdShare sut(0.1, 0);  // 409.6 IDs per ms, a bucket of 409.6
  const auto start = IdShare::Clock::time_point{} + 1h;
  EXPECT_EQ(sut.Admit("addr:a", 4096, start), Verdict::kAdmitted);
  // In debt by 3686.4: refused until about 9 ms later.
  EXPECT_EQ(sut.Admit("addr:a", 4096, start + 8ms), Verdict::kFrontShare);
  EXPECT_EQ(sut.Admit("addr:a", 4096, start + 10ms), Verdict::kAdmitted);
}

TEST(IdShare, EachClientHasItsOwnRateWithinTheShare) {
  IdShare sut(1.0, 1000);  // 1,000 IDs per second per client
  const auto start = IdShare::Clock::time_point{} + 1h;
  EXPECT_EQ(sut.Admit("addr:a", 1000, start), Verdict::kAdmitted);
  // Its bucket is empty at once; another client's is full.
  EXPECT_EQ(sut.Admit("addr:a", 1, start), Verdict::kClientRate);
  EXPECT_EQ(sut.Admit("addr:b", 1000, start), Verdict::kAdmitted);
  EXPECT_GE(sut.RetryAfterMs("addr:a", Verdict::kClientRate, start), 1u);
  EXPECT_EQ(sut.Admit("addr:a", 1, start + 10ms), Verdict::kAdmitted);
}

TEST(IdShare, AShareOfOneLeavesTheLimitToTheMachineNumber) {
  IdShare sut(1.0, 0);
  const auto start = IdShare::Clock::time_point{} + 1h;
  // Two whole milliseconds' worth at one instant: the ring caps it, not the front.
  EXPECT_EQ(sut.Admit("addr:a", 4096, start), Verdict::kAdmitted);
  EXPECT_EQ(sut.Admit("addr:a", 4096, start), Verdict::kAdmitted);
}

TEST(IdShare, ForgetsIdleClientsPastItsLimit) {
  IdShare sut(1.0, 10);
  const auto start = IdShare::Clock::time_point{} + 1h;
  for (size_t i = 0; i < kMaxTrackedClients + 10; ++i) {
    EXPECT_EQ(sut.Admit("addr:" + std::to_string(i), 1, start + std::chrono::seconds(i)),
              Verdict::kAdmitted);
  }
  // A fresh client is admitted after the table was cleaned.
  EXPECT_EQ(sut.Admit("addr:new", 1, start + std::chrono::hours(10)), Verdict::kAdmitted);
}

}  // namespace
}  // namespace snowflake::daemon
