#include "wait_until.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>

namespace snowflake::testing {
namespace {

using namespace std::chrono_literals;

TEST(WaitUntil, SucceedsOnceTheEventHappensOnAnotherThread) {
  std::atomic<bool> happened{false};
  std::thread other([&] { happened = true; });

  const auto sut = WaitUntil([&] { return happened.load(); }, 30s, "the other thread");
  other.join();

  EXPECT_TRUE(sut);
}

TEST(WaitUntil, FailsAtTheDeadlineNamingWhatWasAwaited) {
  int calls = 0;

  const auto sut = WaitUntil([&] { return ++calls < 0; }, 20ms, "a thing that never happens");

  ASSERT_FALSE(sut);
  EXPECT_NE(std::string(sut.message()).find("waiting for a thing that never happens"),
            std::string::npos)
      << sut.message();
  EXPECT_GE(calls, 2) << "checked at the start and again at the deadline";
}

TEST(AttemptUntil, ReturnsTheFirstAcceptedResultAndAttemptsNoMore) {
  int attempts = 0;

  const int sut = AttemptUntil([&] { return ++attempts; }, [](int n) { return n == 3; }, 30s, 1ms);

  EXPECT_EQ(sut, 3);
  EXPECT_EQ(attempts, 3);
}

TEST(AttemptUntil, ReturnsTheLastResultAtTheDeadline) {
  int attempts = 0;

  const std::optional<int> sut = AttemptUntil(
      [&]() -> std::optional<int> {
        ++attempts;
        return std::nullopt;
      },
      kSucceeded, 20ms);

  EXPECT_FALSE(sut.has_value());
  EXPECT_GE(attempts, 2) << "attempted at the start and again at the deadline";
}

TEST(AttemptUntil, ReturnsAMoveOnlyResult) {
  const auto sut = AttemptUntil([] { return std::make_unique<int>(7); },
                                [](const std::unique_ptr<int>& p) { return *p == 7; }, 30s);

  ASSERT_NE(sut, nullptr);
  EXPECT_EQ(*sut, 7);
}

}  // namespace
}  // namespace snowflake::testing
