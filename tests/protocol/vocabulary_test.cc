// The one vocabulary (protocol/vocabulary.h): every row has a code and a text, codes are
// stable-looking lower_snake_case and unique within their table, and each lookup returns
// its enum's row. The static_asserts in vocabulary.cc check order and completeness at
// compile time; these check what a static_assert cannot say readably.

#include "protocol/vocabulary.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <set>
#include <string>
#include <string_view>

namespace snowflake::vocab {
namespace {

using shm::DaemonState;
using shm::ProducerHealth;
using shm::StateReason;

bool IsLowerSnakeCase(std::string_view code) {
  if (code.empty() || code.front() == '_' || code.back() == '_') return false;
  char previous = 0;
  for (const char c : code) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
    if (c == '_' && previous == '_') return false;
    previous = c;
  }
  return code.front() >= 'a' && code.front() <= 'z';
}

TEST(Vocabulary, EveryErrorHasOneUniqueSnakeCaseCodeAndAText) {
  std::set<std::string_view> codes;
  for (const ErrorWords& row : kErrors) {
    EXPECT_TRUE(IsLowerSnakeCase(row.code)) << row.code;
    EXPECT_FALSE(row.text.empty()) << row.code;
    EXPECT_TRUE(codes.insert(row.code).second) << "two conditions share " << row.code;
    EXPECT_EQ(ErrorName(row.error), row.code);
    EXPECT_EQ(ErrorText(row.error), row.text);
  }
  // Every value of the enum, from the first to the last, has its row.
  for (uint32_t value = 1; value <= static_cast<uint32_t>(ErrorCode::kThrottled); ++value) {
    EXPECT_NE(ErrorName(static_cast<ErrorCode>(value)), "unknown") << value;
  }
}

TEST(Vocabulary, EveryErrorCodeReadsBackAsItsError) {
  for (const ErrorWords& row : kErrors) {
    EXPECT_EQ(ErrorFromName(row.code), row.error) << row.code;
  }
  EXPECT_EQ(ErrorFromName("unknown"), std::nullopt);
  EXPECT_EQ(ErrorFromName(""), std::nullopt);
  EXPECT_EQ(ErrorFromName("Daemon_Not_Running"), std::nullopt) << "codes are exact";
}

TEST(Vocabulary, ErrorCodesOutsideTheTableAreUnknown) {
  EXPECT_EQ(ErrorName(static_cast<ErrorCode>(0)), "unknown");
  EXPECT_EQ(ErrorName(static_cast<ErrorCode>(kErrors.size() + 1)), "unknown");
  EXPECT_EQ(ErrorText(static_cast<ErrorCode>(0)), "an unknown error");
}

// The codes the issue found spelled twice, now one each.
TEST(Vocabulary, OneConditionHasOneCode) {
  EXPECT_EQ(ErrorName(ErrorCode::kDaemonNotRunning), "daemon_not_running");
  EXPECT_EQ(ErrorName(ErrorCode::kDaemonPaused), "daemon_paused");
  EXPECT_EQ(ErrorName(ErrorCode::kInvalidServiceName), "invalid_service_name");
  EXPECT_EQ(ErrorName(ErrorCode::kTimeOutOfRange), "time_out_of_range");
  EXPECT_EQ(ErrorName(ErrorCode::kSystemError), "system_error");
  EXPECT_EQ(kNoDaemonHealth.error, ErrorCode::kDaemonNotRunning);
}

TEST(Vocabulary, EveryStateHasAUniqueCodeAndAText) {
  std::set<std::string_view> codes;
  for (const StateWords& row : kStates) {
    EXPECT_TRUE(IsLowerSnakeCase(row.code)) << row.code;
    EXPECT_FALSE(row.text.empty()) << row.code;
    EXPECT_TRUE(codes.insert(row.code).second) << row.code;
    EXPECT_EQ(StateCode(row.state), row.code);
    EXPECT_EQ(StateText(row.state), row.text);
  }
  EXPECT_EQ(StateCode(DaemonState::kOutOfService), "out_of_service");
  EXPECT_EQ(StateText(DaemonState::kOutOfService), "out of service");
  EXPECT_EQ(StateCode(static_cast<DaemonState>(0)), "unknown");
  EXPECT_EQ(StateCode(static_cast<DaemonState>(99)), "unknown");
}

TEST(Vocabulary, EveryHealthHasAUniqueCodeAndTheErrorOfATake) {
  std::set<std::string_view> codes = {kNoDaemonHealth.code};
  for (size_t i = 0; i < kHealth.size(); ++i) {
    const auto health = static_cast<ProducerHealth>(i);
    EXPECT_TRUE(IsLowerSnakeCase(HealthCode(health))) << i;
    EXPECT_TRUE(codes.insert(HealthCode(health)).second) << HealthCode(health);
    if (health != ProducerHealth::kServing) {
      // A take that fails in this health fails with a library error of its own.
      EXPECT_NE(HealthError(health), ErrorCode::kSystemError) << HealthCode(health);
      EXPECT_LE(HealthError(health), kLastLibraryError) << HealthCode(health);
    }
  }
  EXPECT_EQ(HealthError(ProducerHealth::kDead), ErrorCode::kDaemonDead);
  EXPECT_EQ(HealthError(ProducerHealth::kNotHeartbeating), ErrorCode::kDaemonNotHeartbeating);
  EXPECT_EQ(HealthCode(static_cast<ProducerHealth>(99)), "unknown");
}

TEST(Vocabulary, EveryReasonHasAUniqueCodeAndASummary) {
  std::set<std::string_view> codes;
  for (const ReasonWords& row : kReasons) {
    EXPECT_TRUE(IsLowerSnakeCase(row.code)) << row.code;
    EXPECT_TRUE(codes.insert(row.code).second) << row.code;
    EXPECT_EQ(ReasonCode(row.reason), row.code);
    // kNone is the one reason with nothing to say; a detail is shown where it has a place.
    EXPECT_EQ(row.summary.empty(), row.reason == StateReason::kNone) << row.code;
    EXPECT_EQ(row.summary.find("{}") != std::string_view::npos, row.detail != Detail::kNone)
        << row.code;
  }
  EXPECT_EQ(ReasonCode(static_cast<StateReason>(99)), "unknown");
  EXPECT_EQ(WordsFor(static_cast<StateReason>(99)).summary, "reason code unknown");
}

TEST(Vocabulary, DescribeReasonFillsInTheDetail) {
  EXPECT_EQ(DescribeReason(StateReason::kNone, 0), "");
  EXPECT_EQ(DescribeReason(StateReason::kClockBehind, 5), "clock moved back 5 ms");
  EXPECT_EQ(DescribeReason(StateReason::kBehindHighWater, 30),
            "clock started 30 ms behind the persisted high-water mark");
  EXPECT_EQ(DescribeReason(StateReason::kShutdown, 0), "shut down");
}

// A failed renewal names its errno and what it means; one still under way has none, and
// must not claim "errno 0".
TEST(Vocabulary, PersistenceReasonNamesErrnoOnlyWhenThereIsOne) {
  const std::string failed = DescribeReason(StateReason::kPersistenceFailed, ENOSPC);
  EXPECT_NE(failed.find("(errno " + std::to_string(ENOSPC) + ": No space left on device)"),
            std::string::npos)
      << failed;
  const std::string stalled = DescribeReason(StateReason::kPersistenceFailed, 0);
  EXPECT_EQ(stalled.find("errno"), std::string::npos) << stalled;
  EXPECT_NE(stalled.find("not renewed yet"), std::string::npos) << stalled;
}

// An unreachable register is a reason of its own, apart from a store that failed: its
// detail is the time since which the daemon waits, so it stays true while the pause lasts,
// and a reader with a clock adds how long that is.
TEST(Vocabulary, RegisterUnreachableSaysSinceWhenTheDaemonWaits) {
  // Arrange
  const int64_t since = 1'767'225'600'000 + 3'723'456;  // 2026-01-01T01:02:03.456Z
  // Act
  const std::string without_clock = DescribeReason(StateReason::kRegisterUnreachable, since);
  const std::string with_clock =
      DescribeReason(StateReason::kRegisterUnreachable, since, since + 4'210);
  // Assert
  EXPECT_EQ(static_cast<uint32_t>(StateReason::kRegisterUnreachable), 8u);
  EXPECT_EQ(ReasonCode(StateReason::kRegisterUnreachable), "register_unreachable");
  EXPECT_NE(ReasonCode(StateReason::kRegisterUnreachable),
            ReasonCode(StateReason::kPersistenceFailed));
  EXPECT_EQ(WordsFor(StateReason::kRegisterUnreachable).recovery, Recovery::kByItself);
  EXPECT_EQ(WordsFor(StateReason::kRegisterUnreachable).detail, Detail::kSinceUnixMs);
  EXPECT_EQ(without_clock,
            "waiting for the register since 2026-01-01T01:02:03.456Z, not issuing past the "
            "high-water reservation");
  EXPECT_NE(with_clock.find("since 2026-01-01T01:02:03.456Z (4210 ms ago)"), std::string::npos)
      << with_clock;
}

TEST(Vocabulary, RecoveryComesFromTheState) {
  EXPECT_EQ(RecoveryFor(DaemonState::kPaused), Recovery::kByItself);
  EXPECT_EQ(RecoveryFor(DaemonState::kOutOfService), Recovery::kNeedsResume);
  EXPECT_EQ(RecoveryText(Recovery::kByItself), "it resumes by itself");
  EXPECT_EQ(RecoveryText(Recovery::kNone), "");
}

}  // namespace
}  // namespace snowflake::vocab
