// The state the daemon publishes, decided from what the fill loop knows: a pure function,
// tested as a table (tests/daemon/state_decision_test.cc). The fill loop publishes the
// decision when it changes; nothing else decides a state.
//
// Thread-safe: a pure function.

#ifndef SNOWFLAKE_DAEMON_CORE_STATE_DECISION_H_
#define SNOWFLAKE_DAEMON_CORE_STATE_DECISION_H_

#include <cstdint>

#include "daemon/core/generator.h"
#include "snowflake/segment_layout.h"

namespace snowflake::daemon {

struct StateInputs {
  GeneratorState generator = GeneratorState::kServing;
  // The generator is out of service because the epoch's time range is used up.
  bool range_exhausted = false;
  // The generator's current pause began at startup (the clock behind the persisted mark).
  bool started_behind = false;
  // The generator's current pause is behind an operator's fence (Generator::RaiseFence).
  bool fenced = false;
  // The size of the clock's latest step back, in ms, and how far the clock is behind the
  // generator's mark (0 if not).
  int64_t step_ms = 0;
  int64_t ms_behind = 0;
  // IDs were published at least once since this daemon started.
  bool filled_once = false;
  // The clock has passed the confirmed reservation: nothing new may be published.
  bool horizon_reached = false;
  // The reservation's last renewal failed; its errno (0 if none, e.g. a timeout).
  bool reservation_failed = false;
  int reservation_errno = 0;
  // What the reservation waits on is the register, and it has not answered: the last
  // attempt failed as unreachable (a timeout, no leader), or, with no failure yet, the
  // renewal under way is waiting for its answer. Since when (Unix ms): RenewalWait.
  bool register_unanswered = false;
  int64_t waiting_since_unix_ms = 0;
  // The register says the claim is gone, or the daemon is stopping.
  bool claim_lost = false;
  bool stopping = false;
};

struct StateDecision {
  shm::DaemonState state = shm::DaemonState::kStarting;
  shm::StateReason reason = shm::StateReason::kStarting;
  int64_t detail = 0;  // as shm::StateReason documents: ms of a step, errno, ...
  friend bool operator==(const StateDecision&, const StateDecision&) = default;
};

// In order: stopping or a lost claim -> stopped; the generator out of service or paused
// (clock trouble comes first: it would stop a healed store too); the confirmed
// reservation reached while its renewal fails or lags -> paused: register_unreachable
// (detail: since when) when the register has not answered, else persistence_failed
// (detail errno); before the first fill only a failure, not a lag, leaves "starting";
// nothing published yet -> starting; else serving.
StateDecision DecideState(const StateInputs& in) noexcept;

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_CORE_STATE_DECISION_H_
