// What the fill loop reports, and to what: the facts of one pass (StatusFacts) and the
// interface that turns them into the control socket's status, STATUS= and WATCHDOG=1
// (StatusSink, implemented by control/status_reporter.h). The loop sees only this
// interface, so core/ includes nothing of control/, which sits above it.

#ifndef SNOWFLAKE_DAEMON_CORE_STATUS_SINK_H_
#define SNOWFLAKE_DAEMON_CORE_STATUS_SINK_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "daemon/core/state_decision.h"
#include "protocol/control_protocol.h"

namespace snowflake::daemon {

// What changes while serving; the rest of the status is fixed at start.
struct StatusFacts {
  StateDecision decision;
  // Words the reason's summary lacks: which store failed and its sentence.
  std::string reason_extra;
  uint64_t ring_fill = 0;
  uint64_t ring_capacity = 0;
  uint64_t fill_target = 0;
  uint64_t published_total = 0;
  uint64_t drained_total = 0;
  uint64_t incarnation = 0;
  std::optional<uint64_t> last_issued_id;
  int64_t generator_mark_unix_ms = 0;  // Generator::last_unix_ms()
  int64_t reserved_through_unix_ms = 0;
  uint64_t clock_pauses = 0;
  int64_t clock_behind_ms = 0;
  std::map<std::string, uint64_t> services;
  uint64_t segments_retired = 0;       // FillLoop::segments_retired()
  std::string segment_retired_reason;  // FillLoop::segment_retired_reason()
  // While a renewal fails or the daemon waits for one.
  std::optional<protocol::RenewalStatus> renewal;
  // While the generator waits for the clock to pass its mark.
  std::optional<protocol::ClockWait> clock_wait;
  int64_t now_unix_ms = 0;  // the clock when the facts were gathered
};

// Called by the fill loop only, on its thread.
class StatusSink {
 public:
  virtual ~StatusSink() = default;

  // Reports what is due (the status every 50 ms or when `changed`, STATUS= every status
  // interval or when `changed`, WATCHDOG=1 when due). `facts` is called only when
  // something is due.
  virtual void Report(const std::function<StatusFacts()>& facts, bool changed,
                      std::chrono::steady_clock::time_point now) = 0;
  // Refreshes the status now, whatever the schedule.
  virtual void RefreshBoard(const StatusFacts& facts) = 0;
  // The one-line text of STATUS= and of the status's "reason" for `facts`.
  virtual std::string Line(const StatusFacts& facts) const = 0;

  // Resume requests from the control socket: the newest ticket (0 if none; one atomic
  // load), and the loop's answer to every ticket up to `ticket`.
  virtual uint64_t resume_requested() const noexcept = 0;
  virtual void ResumeHandled(uint64_t ticket, bool resumed) = 0;
};

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_CORE_STATUS_SINK_H_
