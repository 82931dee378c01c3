// Waiting in tests for an event, not for a time: WaitUntil polls a predicate until it holds
// or a deadline passes, and its failure names what was awaited and how long the test
// waited, so a timeout reads as "timed out after 30000 ms waiting for etcd to drop A's
// record", not as a bare "false".
//
//   ASSERT_TRUE(WaitUntil([&] { return Get("machines/9").empty(); }, 30s,
//                         "etcd to drop A's record"));
//
// When the awaited event is a value (an ID once the daemon serves again, a status that
// names an error), AttemptUntil retries the call that yields it and returns the value, or
// the last one it got, which then says what happened instead:
//
//   auto id = AttemptUntil([&] { return client.Next(); }, kSucceeded, 20s);
//   ASSERT_TRUE(id) << id.error().message;
//
// The deadline is a bound for a failing run, never a timed assertion: a passing run ends
// as soon as the event happens, and the bound is generous for a loaded, sanitized host.
// Thread-safety: the predicate, the attempt and its test run on the calling thread only.

#ifndef SNOWFLAKE_TESTS_SUPPORT_WAIT_UNTIL_H_
#define SNOWFLAKE_TESTS_SUPPORT_WAIT_UNTIL_H_

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>

namespace snowflake::testing {

// Calls `done()` every `poll` until it returns true (AssertionSuccess) or `timeout` has
// passed (AssertionFailure naming `what`). `done` is called once more at the deadline, so
// an event that happens during the last poll interval still counts.
template <typename Predicate>
::testing::AssertionResult WaitUntil(
    Predicate&& done, std::chrono::milliseconds timeout, std::string_view what,
    std::chrono::milliseconds poll = std::chrono::milliseconds(5)) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + timeout;
  for (;;) {
    if (done()) return ::testing::AssertionSuccess();
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(poll);
  }
  if (done()) return ::testing::AssertionSuccess();
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  return ::testing::AssertionFailure()
         << "timed out after " << waited.count() << " ms waiting for " << what;
}

// Calls `attempt()` until `accept(result)` holds, `poll` apart, and returns that result;
// once `timeout` has passed, returns the last result instead (there is always an attempt
// at or after the deadline, so an event during the last poll interval still counts).
template <typename Attempt, typename Accept>
std::decay_t<std::invoke_result_t<Attempt&>> AttemptUntil(
    Attempt&& attempt, Accept&& accept, std::chrono::milliseconds timeout,
    std::chrono::milliseconds poll = std::chrono::milliseconds(5)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::decay_t<std::invoke_result_t<Attempt&>> result = attempt();
    if (accept(std::as_const(result)) || std::chrono::steady_clock::now() >= deadline) {
      return result;
    }
    std::this_thread::sleep_for(poll);
  }
}

// AttemptUntil's test for results that convert to bool: a tl::expected that holds a
// value, a std::optional that is set.
inline constexpr auto kSucceeded = [](const auto& result) { return static_cast<bool>(result); };

}  // namespace snowflake::testing

#endif  // SNOWFLAKE_TESTS_SUPPORT_WAIT_UNTIL_H_
