#include "daemon/core/state_words.h"

#include <array>

namespace snowflake::daemon {
namespace {

using shm::DaemonState;
using shm::StateReason;

// The table. Order does not matter; every StateReason appears once.
constexpr std::array<ReasonWords, 8> kReasons = {{
    {StateReason::kNone, "", Recovery::kNone},
    {StateReason::kStarting, "starting up", Recovery::kNone},
    {StateReason::kClockBehind, "clock moved back {} ms", Recovery::kByItself},
    {StateReason::kClockStepTooLarge, "clock moved back {} ms, more than max_backward_ms",
     Recovery::kNeedsResume},
    // Paused: a restart waiting out its own reservation; out of service: further behind.
    // The recovery comes from the state (see DescribeReason's callers), so one text fits.
    {StateReason::kBehindHighWater, "clock started {} ms behind the persisted high-water mark",
     Recovery::kByItself},
    {StateReason::kTimeRangeExhausted, "the epoch's 41-bit time range is used up",
     Recovery::kNeedsResume},
    {StateReason::kShutdown, "shut down", Recovery::kFinal},
    {StateReason::kPersistenceFailed,
     "cannot persist the high-water reservation, not issuing past it (errno {})",
     Recovery::kByItself},
}};

constexpr ReasonWords kUnknown{StateReason::kNone, "reason code unknown", Recovery::kNone};

}  // namespace

const ReasonWords& WordsFor(StateReason reason) noexcept {
  for (const ReasonWords& words : kReasons) {
    if (words.reason == reason) return words;
  }
  return kUnknown;
}

std::string_view StateText(DaemonState state) noexcept {
  switch (state) {
    case DaemonState::kStarting: return "starting";
    case DaemonState::kServing: return "serving";
    case DaemonState::kPaused: return "paused";
    case DaemonState::kOutOfService: return "out of service";
    case DaemonState::kStopped: return "stopped";
  }
  return "unknown";
}

Recovery RecoveryFor(DaemonState state) noexcept {
  switch (state) {
    case DaemonState::kPaused: return Recovery::kByItself;
    case DaemonState::kOutOfService: return Recovery::kNeedsResume;
    case DaemonState::kStopped: return Recovery::kFinal;
    case DaemonState::kStarting:
    case DaemonState::kServing: return Recovery::kNone;
  }
  return Recovery::kNone;
}

std::string_view RecoveryText(Recovery recovery) noexcept {
  switch (recovery) {
    case Recovery::kByItself: return "it resumes by itself";
    case Recovery::kNeedsResume: return "run `snowflakectl resume` after checking the clock";
    case Recovery::kNone:
    case Recovery::kFinal: return "";
  }
  return "";
}

std::string DescribeReason(StateReason reason, int64_t detail, std::string_view extra) {
  const ReasonWords& words = WordsFor(reason);
  std::string text(words.summary);
  if (const size_t at = text.find("{}"); at != std::string::npos) {
    text.replace(at, 2, std::to_string(detail));
  }
  // A renewal that has not failed but not finished either has no errno to show.
  if (reason == StateReason::kPersistenceFailed && detail == 0) {
    text = "the high-water reservation is not renewed yet, not issuing past it";
  }
  if (!extra.empty()) text += " (" + std::string(extra) + ")";
  return text;
}

}  // namespace snowflake::daemon
