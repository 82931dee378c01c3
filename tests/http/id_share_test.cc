// IdShare (daemon/http/id_share.h) alone, over a time the test sets: the property is that
// over any T ms the front admits at most max_share * ids_per_ms * T IDs plus one bucket and
// one take (ids_per_ms: the layout's, 4096 in the default), and that a client's rate holds
// apart from the front's share.

#include "daemon/http/id_share.h"

#include <gtest/gtest.h>

#include <chrono>

#include "snowflake/id_layout.h"

namespace snowflake::daemon {
namespace {

using namespace std::chrono_literals;
using Verdict = IdShare::Verdict;

// The default layout's ceiling, which the figures below are worked out for.
constexpr double kIdsPerMs = IdLayout().ids_per_ms();

TEST(IdShare, AdmitsAtMostItsShareOfTheMachineNumberOverManyMilliseconds) {
  IdShare sut(0.25, 0, kIdsPerMs);
  const auto start = IdShare::SteadyTime{} + 1h;
  uint64_t admitted = 0;
  uint64_t refused = 0;
  // 10,000 ms, a take of 100 IDs asked every 10 µs: far more than the share.
  for (int step = 0; step < 1'000'000; ++step) {
    const auto now = start + std::chrono::microseconds(step * 10);
    if (sut.Admit("addr:a", 100, now).verdict == Verdict::kAdmitted) {
      admitted += 100;
    } else {
      ++refused;
    }
  }
  const double share = 0.25 * 4096 * 10'000;
  EXPECT_LE(admitted, share + 0.25 * 4096 * kShareBurstMs + 100);
  EXPECT_GE(admitted, share - 100);  // and it does hand out its share
  EXPECT_GT(refused, 0u);
}

TEST(IdShare, ATakeLargerThanTheBucketIsServedAtTheAverageRate) {
  IdShare sut(0.005, 0, kIdsPerMs);  // 20.48 IDs per ms, a bucket of 2,048 (100 ms)
  const auto start = IdShare::SteadyTime{} + 1h;
  EXPECT_EQ(sut.Admit("addr:a", 4096, start).verdict, Verdict::kAdmitted);
  // In debt by 2,048: refused until the bucket is full again, 200 ms later.
  const auto refused = sut.Admit("addr:a", 4096, start + 190ms);
  EXPECT_EQ(refused.verdict, Verdict::kFrontShare);
  EXPECT_EQ(refused.retry_after_s, 1u);
  EXPECT_EQ(sut.Admit("addr:a", 4096, start + 201ms).verdict, Verdict::kAdmitted);
}

TEST(IdShare, BatchesBackToBackFarBelowTheShareAreNotRefused) {
  IdShare sut(0.5, 0, kIdsPerMs);  // the default share
  const auto start = IdShare::SteadyTime{} + 1h;
  // A failover client taking 4,096-ID batches 100 µs apart for 10 batches: 40,960 IDs,
  // within the 100 ms bucket of 204,800, though each millisecond holds only 2,048.
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(sut.Admit("addr:a", 4096, start + std::chrono::microseconds(100 * i)).verdict,
              Verdict::kAdmitted)
        << "batch " << i;
  }
}

TEST(IdShare, EachClientHasItsOwnRateWithinTheShare) {
  IdShare sut(1.0, 1000, kIdsPerMs);  // 1,000 IDs per second per client
  const auto start = IdShare::SteadyTime{} + 1h;
  EXPECT_EQ(sut.Admit("addr:a", 1000, start).verdict, Verdict::kAdmitted);
  // Its bucket is empty at once; another client's is full.
  const auto refused = sut.Admit("addr:a", 1, start);
  EXPECT_EQ(refused.verdict, Verdict::kClientRate);
  EXPECT_EQ(sut.Admit("addr:b", 1000, start).verdict, Verdict::kAdmitted);
  EXPECT_GE(refused.retry_after_s, 1u);
  EXPECT_EQ(sut.Admit("addr:a", 1, start + 10ms).verdict, Verdict::kAdmitted);
}

TEST(IdShare, AShareOfOneLeavesTheLimitToTheMachineNumber) {
  IdShare sut(1.0, 0, kIdsPerMs);
  const auto start = IdShare::SteadyTime{} + 1h;
  // Two whole milliseconds' worth at one instant: the machine number caps it, not the
  // front, whose bucket holds 100 ms of the whole number.
  EXPECT_EQ(sut.Admit("addr:a", 4096, start).verdict, Verdict::kAdmitted);
  EXPECT_EQ(sut.Admit("addr:a", 4096, start).verdict, Verdict::kAdmitted);
}

TEST(IdShare, ForgetsIdleClientsPastItsLimit) {
  IdShare sut(1.0, 10, kIdsPerMs);
  const auto start = IdShare::SteadyTime{} + 1h;
  for (size_t i = 0; i < kMaxTrackedClients + 10; ++i) {
    EXPECT_EQ(sut.Admit("addr:" + std::to_string(i), 1, start + std::chrono::seconds(i)).verdict,
              Verdict::kAdmitted);
  }
  // A fresh client is admitted after the table was cleaned.
  EXPECT_EQ(sut.Admit("addr:new", 1, start + std::chrono::hours(10)).verdict, Verdict::kAdmitted);
}

// A table full of clients that are all throttled is never cleared whole: a client deep in
// debt keeps its debt while ten thousand others come, and the entries forgotten are those
// nearest to a full bucket (the least a forgotten client can gain).
TEST(IdShare, AFullTableForgetsTheFullestBucketsNotAThrottledClientsDebt) {
  IdShare sut(1.0, 1, kIdsPerMs);  // one ID per second per client: a bucket of one
  const auto start = IdShare::SteadyTime{} + 1h;
  // A take larger than the bucket is admitted when it is full and leaves it in debt.
  ASSERT_EQ(sut.Admit("addr:deep", 4096, start).verdict, Verdict::kAdmitted);
  ASSERT_EQ(sut.Admit("addr:deep", 1, start).verdict, Verdict::kClientRate);
  for (size_t i = 0; i < kMaxTrackedClients + 100; ++i) {
    ASSERT_EQ(sut.Admit("addr:" + std::to_string(i), 2, start + std::chrono::milliseconds(i / 100))
                  .verdict,
              Verdict::kAdmitted)
        << i;
  }
  EXPECT_EQ(sut.Admit("addr:deep", 1, start + 1s).verdict, Verdict::kClientRate)
      << "the throttled client got a full bucket back when the table filled";
}

// The ceiling is the layout's: 41/16/6 gives a machine number 64 IDs per millisecond, so a
// share of 1 admits about 64 per ms, not the default's 4,096.
TEST(IdShare, TheShareIsOfTheLayoutsIdsPerMillisecond) {
  const double wide_per_ms = IdLayout::Create(kDefaultEpochUnixMs, {41, 16, 6})->ids_per_ms();
  IdShare sut(1.0, 0, wide_per_ms);
  const auto start = IdShare::SteadyTime{} + 1h;
  uint64_t admitted = 0;
  // 1,000 ms, a take of 8 IDs asked every 10 µs.
  for (int step = 0; step < 100'000; ++step) {
    const auto now = start + std::chrono::microseconds(step * 10);
    if (sut.Admit("addr:a", 8, now).verdict == Verdict::kAdmitted) admitted += 8;
  }
  EXPECT_LE(admitted, 64 * 1000 + 64 * kShareBurstMs + 8);
  EXPECT_GE(admitted, 64 * 1000 - 8);
}

}  // namespace
}  // namespace snowflake::daemon
