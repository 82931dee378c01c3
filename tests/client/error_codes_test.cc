// libsnowflake's error codes come from the one vocabulary (protocol/vocabulary.h): the
// C++ API's ClientErrorName and the C ABI's sf_status_str (whose codes the Python and Go
// bindings map to their exceptions and sentinels) give the table's code for every error.

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "protocol/vocabulary.h"
#include "snowflake/client_error.h"
#include "snowflake/snowflake.h"

namespace snowflake {
namespace {

constexpr int kLastStatus = SF_TIME_OUT_OF_RANGE;

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
  // ClientError runs from kInvalidServiceName (SF_INVALID_SERVICE_NAME) to kSystemError.
  for (int e = 0; e <= static_cast<int>(ClientError::kSystemError); ++e) {
    const auto error = static_cast<ClientError>(e);
    EXPECT_EQ(ClientErrorName(error), sf_status_str(static_cast<sf_status>(e + 1))) << e;
  }
  EXPECT_EQ(ClientErrorName(ClientError::kDaemonNotRunning), "daemon_not_running");
  EXPECT_EQ(ClientErrorName(ClientError::kDaemonPaused), "daemon_paused");
}

}  // namespace
}  // namespace snowflake
