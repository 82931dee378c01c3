#include "protocol/vocabulary.h"

#include <algorithm>
#include <cstring>

#include "snowflake/time_text.h"

namespace snowflake::vocab {
namespace {

using shm::DaemonState;
using shm::ProducerHealth;
using shm::StateReason;

// Each table is indexed by its enum's value (minus the first value), so a lookup is one
// bounds check; these checks make a missing, extra or misplaced row a compile error.
template <typename Table, typename KeyOf>
constexpr bool InEnumOrder(const Table& table, uint32_t first, KeyOf key_of) {
  for (size_t i = 0; i < table.size(); ++i) {
    if (static_cast<uint32_t>(key_of(table[i])) != first + i) return false;
  }
  return true;
}

constexpr bool AllCodesDistinct() {
  for (size_t i = 0; i < kErrors.size(); ++i) {
    for (size_t j = i + 1; j < kErrors.size(); ++j) {
      if (kErrors[i].code == kErrors[j].code) return false;
    }
  }
  return true;
}

static_assert(InEnumOrder(kErrors, 1, [](const ErrorWords& row) { return row.error; }),
              "kErrors must list every ErrorCode once, in enum order from 1");
static_assert(kErrors.back().error == ErrorCode::kThrottled,
              "kErrors must end with the last ErrorCode");
static_assert(InEnumOrder(kActions, 1, [](const ActionWords& row) { return row.action; }),
              "kActions must list every ErrorAction once, in enum order from 1");
static_assert(std::ranges::all_of(kErrors,
                                  [](const ErrorWords& row) {
                                    return row.action >= ErrorAction::kFailOver &&
                                           row.action <= ErrorAction::kFixTheHost;
                                  }),
              "every error code must say what its caller does");
static_assert(AllCodesDistinct(), "two error conditions with one code");
static_assert(InEnumOrder(kStates, 1, [](const StateWords& row) { return row.state; }),
              "kStates must list every DaemonState once, in enum order from 1");
static_assert(kStates.back().state == DaemonState::kStopped,
              "kStates must end with the last DaemonState");
static_assert(InEnumOrder(kReasons, 0, [](const ReasonWords& row) { return row.reason; }),
              "kReasons must list every StateReason once, in enum order from 0");
static_assert(kReasons.back().reason == StateReason::kFenced,
              "kReasons must end with the last StateReason");
static_assert(static_cast<size_t>(ProducerHealth::kDead) + 1 == kHealth.size(),
              "kHealth must have one row per ProducerHealth");
static_assert(kHealth[static_cast<size_t>(ProducerHealth::kServing)].code == "serving" &&
                  kHealth[static_cast<size_t>(ProducerHealth::kPaused)].code == "paused" &&
                  kHealth[static_cast<size_t>(ProducerHealth::kNotHeartbeating)].code ==
                      "not_heartbeating" &&
                  kHealth[static_cast<size_t>(ProducerHealth::kDead)].code == "dead",
              "kHealth is indexed by ProducerHealth");

// A health that is a state has the state's code.
constexpr bool HealthCodesAreStateCodes() {
  constexpr std::pair<ProducerHealth, DaemonState> kSame[] = {
      {ProducerHealth::kServing, DaemonState::kServing},
      {ProducerHealth::kStarting, DaemonState::kStarting},
      {ProducerHealth::kPaused, DaemonState::kPaused},
      {ProducerHealth::kOutOfService, DaemonState::kOutOfService},
      {ProducerHealth::kStopped, DaemonState::kStopped},
  };
  for (const auto& [health, state] : kSame) {
    if (kHealth[static_cast<size_t>(health)].code != kStates[static_cast<size_t>(state) - 1].code) {
      return false;
    }
  }
  return true;
}
static_assert(HealthCodesAreStateCodes(), "a health that is a state must use the state's code");

constexpr ReasonWords kUnknownReason{StateReason::kNone, "unknown",      "reason code unknown", "",
                                     Detail::kNone,      Recovery::kNone};

}  // namespace

std::string_view ErrorName(ErrorCode error) noexcept {
  const auto at = static_cast<size_t>(error) - 1;  // value 0 wraps past the end
  return at < kErrors.size() ? kErrors[at].code : "unknown";
}

ErrorAction ActionOf(ErrorCode error) noexcept {
  const auto at = static_cast<size_t>(error) - 1;
  return at < kErrors.size() ? kErrors[at].action : ErrorAction::kFixTheHost;
}

std::string_view ActionCode(ErrorAction action) noexcept {
  const auto at = static_cast<size_t>(action) - 1;
  return at < kActions.size() ? kActions[at].code : "unknown";
}

std::string_view ErrorText(ErrorCode error) noexcept {
  const auto at = static_cast<size_t>(error) - 1;
  return at < kErrors.size() ? kErrors[at].text : "an unknown error";
}

std::optional<ErrorCode> ErrorFromName(std::string_view code) noexcept {
  for (const ErrorWords& row : kErrors) {
    if (row.code == code) return row.error;
  }
  return std::nullopt;
}

static_assert(InEnumOrder(kMarkSources, 0, [](const MarkSourceWords& row) { return row.source; }),
              "kMarkSources must list every MarkSource once, in enum order from 0");
static_assert(kMarkSources.back().source == MarkSource::kLastIssued,
              "kMarkSources must end with the last MarkSource");

std::string_view MarkSourceCode(MarkSource source) noexcept {
  const auto at = static_cast<size_t>(source);
  return at < kMarkSources.size() ? kMarkSources[at].code : kMarkSources[0].code;
}

std::string_view MarkSourceText(MarkSource source) noexcept {
  const auto at = static_cast<size_t>(source);
  return at < kMarkSources.size() ? kMarkSources[at].text : kMarkSources[0].text;
}

std::string_view MarkSourceTextOfCode(std::string_view code) noexcept {
  for (const MarkSourceWords& row : kMarkSources) {
    if (row.code == code) return row.text;
  }
  return code;
}

std::string_view StateCode(DaemonState state) noexcept {
  const auto at = static_cast<size_t>(state) - 1;
  return at < kStates.size() ? kStates[at].code : "unknown";
}

std::string_view StateText(DaemonState state) noexcept {
  const auto at = static_cast<size_t>(state) - 1;
  return at < kStates.size() ? kStates[at].text : "unknown";
}

std::string_view HealthCode(ProducerHealth health) noexcept {
  const auto at = static_cast<size_t>(health);
  return at < kHealth.size() ? kHealth[at].code : "unknown";
}

ErrorCode HealthError(ProducerHealth health) noexcept {
  const auto at = static_cast<size_t>(health);
  return at < kHealth.size() ? kHealth[at].error : ErrorCode::kSystemError;
}

std::string_view ReasonCode(StateReason reason) noexcept { return WordsFor(reason).code; }

const ReasonWords& WordsFor(StateReason reason) noexcept {
  const auto at = static_cast<size_t>(reason);
  return at < kReasons.size() ? kReasons[at] : kUnknownReason;
}

std::string DescribeReason(StateReason reason, int64_t detail, std::optional<int64_t> now_unix_ms) {
  const ReasonWords& words = WordsFor(reason);
  if (detail == 0 && !words.summary_without_detail.empty()) {
    return std::string(words.summary_without_detail);
  }
  std::string text(words.summary);
  if (const size_t at = text.find("{}"); at != std::string::npos) {
    std::string value = std::to_string(detail);
    if (words.detail == Detail::kErrno) {
      // strerrordesc_np, unlike strerror, is safe from any thread (static text, or null).
      const char* what = strerrordesc_np(static_cast<int>(detail));
      value += ": ";
      value += what != nullptr ? what : "unknown error";
    } else if (words.detail == Detail::kSinceUnixMs) {
      value = FormatTimeText(detail);
      if (now_unix_ms) value += " (" + std::to_string(*now_unix_ms - detail) + " ms ago)";
    }
    text.replace(at, 2, value);
  }
  return text;
}

Recovery RecoveryFor(DaemonState state) noexcept {
  switch (state) {
    case DaemonState::kPaused:
      return Recovery::kByItself;
    case DaemonState::kOutOfService:
      return Recovery::kNeedsResume;
    case DaemonState::kStopped:
      return Recovery::kFinal;
    case DaemonState::kStarting:
    case DaemonState::kServing:
      return Recovery::kNone;
  }
  return Recovery::kNone;
}

std::string_view RecoveryText(Recovery recovery) noexcept {
  switch (recovery) {
    case Recovery::kByItself:
      return "it resumes by itself";
    case Recovery::kNeedsResume:
      return "run `snowflakectl resume` after checking the clock";
    case Recovery::kNone:
    case Recovery::kFinal:
      return "";
  }
  return "";
}

}  // namespace snowflake::vocab
