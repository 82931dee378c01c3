// The startup retry schedule (util/backoff.h): every delay lies in [nominal / 2,
// nominal], the nominal doubles from `first` and never exceeds `cap`, and the jitter
// really varies (two seeds give two schedules).

#include "util/backoff.h"

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

namespace snowflake::util {
namespace {

using std::chrono::milliseconds;

TEST(Backoff, DelaysDoubleWithinHalfToFullNominalUpToTheCap) {
  // Arrange
  for (uint64_t seed = 0; seed < 50; ++seed) {
    Backoff sut(milliseconds(200), milliseconds(5000), seed);
    int64_t nominal = 200;

    // Act / Assert
    for (int i = 0; i < 20; ++i) {
      const milliseconds delay = sut.Next();
      ASSERT_GE(delay.count(), nominal / 2) << "seed " << seed << " call " << i;
      ASSERT_LE(delay.count(), nominal) << "seed " << seed << " call " << i;
      nominal = std::min<int64_t>(nominal * 2, 5000);
    }
  }
}

TEST(Backoff, NeverExceedsTheCapEvenAfterManyCalls) {
  // Arrange
  Backoff sut(milliseconds(1), milliseconds(7), 42);

  // Act / Assert
  for (int i = 0; i < 10'000; ++i) ASSERT_LE(sut.Next().count(), 7);
}

TEST(Backoff, JitterDiffersBetweenSeeds) {
  // Arrange
  Backoff a(milliseconds(1000), milliseconds(100'000), 1);
  Backoff b(milliseconds(1000), milliseconds(100'000), 2);
  std::vector<int64_t> from_a;
  std::vector<int64_t> from_b;

  // Act
  for (int i = 0; i < 8; ++i) {
    from_a.push_back(a.Next().count());
    from_b.push_back(b.Next().count());
  }

  // Assert
  EXPECT_NE(from_a, from_b);
}

}  // namespace
}  // namespace snowflake::util
