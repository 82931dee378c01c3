#include "daemon/core/state_decision.h"

#include <algorithm>

namespace snowflake::daemon {

using shm::DaemonState;
using shm::StateReason;

StateDecision DecideState(const StateInputs& in) noexcept {
  if (in.stopping || in.claim_lost) return {DaemonState::kStopped, StateReason::kShutdown, 0};
  // The step is what the operator wants to read ("moved back 5 ms"); the lag behind the
  // mark can be smaller (the mark may be older than the last reading).
  const int64_t step = std::max(in.step_ms, in.ms_behind);
  switch (in.generator) {
    case GeneratorState::kOutOfService:
      if (in.range_exhausted) return {DaemonState::kOutOfService, StateReason::kTimeRangeExhausted, 0};
      if (in.started_behind) {
        return {DaemonState::kOutOfService, StateReason::kBehindHighWater, in.ms_behind};
      }
      return {DaemonState::kOutOfService, StateReason::kClockStepTooLarge, step};
    case GeneratorState::kPaused:
      if (in.fenced) return {DaemonState::kPaused, StateReason::kFenced, in.ms_behind};
      if (in.started_behind) return {DaemonState::kPaused, StateReason::kBehindHighWater, in.ms_behind};
      return {DaemonState::kPaused, StateReason::kClockBehind, step};
    case GeneratorState::kServing:
      break;
  }
  if (in.horizon_reached && (in.reservation_failed || in.filled_once)) {
    if (in.register_unanswered) {
      return {DaemonState::kPaused, StateReason::kRegisterUnreachable, in.waiting_since_unix_ms};
    }
    return {DaemonState::kPaused, StateReason::kPersistenceFailed,
            in.reservation_failed ? in.reservation_errno : 0};
  }
  if (!in.filled_once) return {DaemonState::kStarting, StateReason::kStarting, 0};
  return {DaemonState::kServing, StateReason::kNone, 0};
}

}  // namespace snowflake::daemon
