#include "wait_until.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
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

}  // namespace
}  // namespace snowflake::testing
