// libsnowflake's error codes come from the one vocabulary (protocol/vocabulary.h): the
// C++ API's ClientErrorName and the C ABI's sf_status_str (whose codes the Python and Go
// bindings map to their exceptions and sentinels) give the table's code for every error,
// and sf_status_action its action (what a caller does: fail over, retry, fix the call or
// the host).

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "protocol/vocabulary.h"
#include "snowflake/client_error.h"
#include "snowflake/snowflake.h"

namespace snowflake {
namespace {

constexpr int kLastStatus = SF_RING_EMPTY;

// Whether status `s` has a ClientError (s - 1): all but sf_bounds' SF_TIME_OUT_OF_RANGE.
bool HasClientError(int s) { return s >= 1 && s <= kLastStatus && s != SF_TIME_OUT_OF_RANGE; }

TEST(ErrorCodes, EveryCStatusNamesTheVocabularysCode) {
  EXPECT_STREQ(sf_status_str(SF_OK), "ok");
  std::set<std::string> seen;
  for (int s = 1; s <= kLastStatus; ++s) {
    const std::string name = sf_status_str(static_cast<sf_status>(s));
    EXPECT_EQ(name, vocab::ErrorName(static_cast<vocab::ErrorCode>(s))) << s;
    EXPECT_TRUE(seen.insert(name).second) << name;
  }
  // The library's codes are exactly the statuses: none is left without one.
  EXPECT_EQ(static_cast<int>(vocab::kFirstLibraryError), 1);
  EXPECT_EQ(static_cast<int>(vocab::kLastLibraryError), kLastStatus);
  EXPECT_STREQ(sf_status_str(static_cast<sf_status>(kLastStatus + 1)), "unknown_status");
  EXPECT_STREQ(sf_status_str(static_cast<sf_status>(-1)), "unknown_status");
}

TEST(ErrorCodes, EveryClientErrorNamesTheSameCodeAsItsCStatus) {
  // ClientError runs from kInvalidServiceName (SF_INVALID_SERVICE_NAME) to kSystemError,
  // then kRingEmpty (SF_RING_EMPTY) past SF_TIME_OUT_OF_RANGE, which sf_bounds alone gives.
  for (int s = 1; s <= kLastStatus; ++s) {
    if (!HasClientError(s)) continue;
    const auto error = static_cast<ClientError>(s - 1);
    EXPECT_EQ(ClientErrorName(error), sf_status_str(static_cast<sf_status>(s))) << s;
  }
  EXPECT_EQ(ClientErrorName(ClientError::kDaemonNotRunning), "daemon_not_running");
  EXPECT_EQ(ClientErrorName(ClientError::kDaemonPaused), "daemon_paused");
  EXPECT_EQ(ClientErrorName(ClientError::kRingEmpty), "ring_empty");
}

// The code appended for an empty ring: its ABI value follows the last one (none of the
// others moved), and it says retry here, where timed_out says fail over.
TEST(ErrorCodes, RingEmptyIsStatus17AndItsActionIsRetryHere) {
  EXPECT_EQ(SF_RING_EMPTY, 17);
  EXPECT_EQ(SF_TIMED_OUT, 14);
  EXPECT_EQ(SF_TIME_OUT_OF_RANGE, 16);
  EXPECT_EQ(static_cast<int>(ClientError::kRingEmpty) + 1, SF_RING_EMPTY);
  EXPECT_STREQ(sf_status_str(SF_RING_EMPTY), "ring_empty");
  EXPECT_EQ(sf_status_action(SF_RING_EMPTY), SF_ACTION_RETRY_HERE);
  EXPECT_STREQ(sf_action_str(sf_status_action(SF_RING_EMPTY)), "retry_here");
  EXPECT_FALSE(AnotherDaemonMayServe(ClientError::kRingEmpty));
  EXPECT_EQ(sf_status_action(SF_TIMED_OUT), SF_ACTION_FAIL_OVER);
  EXPECT_TRUE(AnotherDaemonMayServe(ClientError::kTimedOut));
  EXPECT_EQ(vocab::ActionOf(vocab::ErrorCode::kRingEmpty), vocab::ErrorAction::kRetryHere);
  EXPECT_NE(vocab::ErrorText(vocab::ErrorCode::kRingEmpty).find("retry here"),
            std::string_view::npos);
}

// The one failover rule: sf_status_action is the vocabulary's column, and the C++
// AnotherDaemonMayServe says "fail over" for exactly its kFailOver codes.
TEST(ErrorCodes, EveryStatusCarriesTheVocabularysActionAndFailoverFollowsIt) {
  EXPECT_EQ(sf_status_action(SF_OK), SF_ACTION_NONE);
  EXPECT_STREQ(sf_action_str(SF_ACTION_NONE), "none");
  std::set<std::string> fail_over;
  for (int s = 1; s <= kLastStatus; ++s) {
    const auto status = static_cast<sf_status>(s);
    const vocab::ErrorAction action = vocab::ActionOf(static_cast<vocab::ErrorCode>(s));
    EXPECT_EQ(static_cast<int>(sf_status_action(status)), static_cast<int>(action)) << s;
    EXPECT_EQ(sf_action_str(sf_status_action(status)), vocab::ActionCode(action)) << s;
    if (action == vocab::ErrorAction::kFailOver) fail_over.insert(sf_status_str(status));
    if (HasClientError(s)) {
      EXPECT_EQ(AnotherDaemonMayServe(static_cast<ClientError>(s - 1)),
                action == vocab::ErrorAction::kFailOver)
          << sf_status_str(status);
    }
  }
  // What docs/client.md promises, spelled out once so a change of the column is seen.
  EXPECT_EQ(fail_over,
            (std::set<std::string>{"daemon_not_running", "daemon_starting", "daemon_paused",
                                   "daemon_out_of_service", "daemon_stopped",
                                   "daemon_not_heartbeating", "daemon_dead", "timed_out"}));
  EXPECT_EQ(sf_status_action(SF_INVALID_ARGUMENT), SF_ACTION_FIX_THE_CALL);
  EXPECT_EQ(sf_status_action(SF_PERMISSION_DENIED), SF_ACTION_FIX_THE_HOST);
  EXPECT_EQ(sf_status_action(static_cast<sf_status>(kLastStatus + 1)), SF_ACTION_FIX_THE_HOST);
  EXPECT_STREQ(sf_action_str(static_cast<sf_action>(9)), "unknown");
  EXPECT_EQ(vocab::ActionOf(vocab::ErrorCode::kThrottled), vocab::ErrorAction::kRetryHere);
}

}  // namespace
}  // namespace snowflake
