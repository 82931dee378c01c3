// One vocabulary for the daemon's states and reasons: the name of each (the segment's and
// the control protocol's code, shm::DaemonStateName/StateReasonName), its text for logs,
// STATUS= and `snowflakectl status`, and what happens next. Every place the daemon speaks
// of a state or reason takes its words from the table in state_words.cc, never from a
// switch of its own.
//
// Thread-safe: pure functions over constant tables.

#ifndef SNOWFLAKE_DAEMON_STATE_WORDS_H_
#define SNOWFLAKE_DAEMON_STATE_WORDS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "snowflake/segment_layout.h"

namespace snowflake::daemon {

// What ends a state of this reason.
enum class Recovery {
  kNone,         // serving or starting: nothing to recover from
  kByItself,     // the daemon resumes by itself (the clock passes the mark, a store heals)
  kNeedsResume,  // out of service until `snowflakectl resume`
  kFinal,        // stopped
};

struct ReasonWords {
  shm::StateReason reason;
  // The summary; "{}" stands for the detail (ms of a clock step, errno, ...).
  std::string_view summary;
  Recovery recovery;
};

// The words for `reason` (a reason outside the table gets a generic entry).
const ReasonWords& WordsFor(shm::StateReason reason) noexcept;

// "serving", "paused", "out of service", "starting", "stopped": the human name (the
// code is shm::DaemonStateName()).
std::string_view StateText(shm::DaemonState state) noexcept;

// What ends `state`: paused resumes by itself, out of service needs `snowflakectl resume`,
// whatever the reason (one rule, so clients and logs never tell two stories).
Recovery RecoveryFor(shm::DaemonState state) noexcept;

// What comes next, for the reason's Recovery: "it resumes by itself", "run `snowflakectl
// resume` after checking the clock", or "".
std::string_view RecoveryText(Recovery recovery) noexcept;

// The whole reason in words: the summary with its detail, then `extra` in parentheses
// (which store failed, a generator's bound), then the recovery text after "; ".
// "clock moved back 5 ms; it resumes by itself".
std::string DescribeReason(shm::StateReason reason, int64_t detail, std::string_view extra = "");

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_STATE_WORDS_H_
