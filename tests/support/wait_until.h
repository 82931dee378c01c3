// Waiting in tests for an event, not for a time: WaitUntil polls a predicate until it holds
// or a deadline passes, and its failure names what was awaited and how long the test
// waited, so a timeout reads as "timed out after 30000 ms waiting for etcd to drop A's
// record", not as a bare "false".
//
//   ASSERT_TRUE(WaitUntil([&] { return Get("machines/9").empty(); }, 30s,
//                         "etcd to drop A's record"));
//
// The deadline is a bound for a failing run, never a timed assertion: a passing run ends
// as soon as the event happens, and the bound is generous for a loaded, sanitized host.
// Thread-safety: the predicate runs on the calling thread only.

#ifndef SNOWFLAKE_TESTS_SUPPORT_WAIT_UNTIL_H_
#define SNOWFLAKE_TESTS_SUPPORT_WAIT_UNTIL_H_

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <string_view>
#include <thread>

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

}  // namespace snowflake::testing

#endif  // SNOWFLAKE_TESTS_SUPPORT_WAIT_UNTIL_H_
