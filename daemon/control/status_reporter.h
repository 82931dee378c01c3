// Status and notifications: the snapshot the control socket serves (StatusBoard), STATUS=
// and WATCHDOG=1 to systemd (Notifier), composed from one set of facts the fill loop
// hands over, in the words of daemon/core/state_words.h.
//
// Not thread-safe: the fill loop owns it (the StatusBoard inside is shared with the
// control socket and is thread-safe itself).

#ifndef SNOWFLAKE_DAEMON_STATUS_REPORTER_H_
#define SNOWFLAKE_DAEMON_STATUS_REPORTER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "daemon/control/status_board.h"
#include "daemon/core/state_decision.h"
#include "daemon/notifier.h"

namespace snowflake::daemon {

// What changes while serving; the rest of DaemonStatus is fixed at construction.
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
  std::optional<RenewalStatus> renewal;  // while a renewal fails or the daemon waits for one
  int64_t now_unix_ms = 0;               // the clock when the facts were gathered
};

// The one-line text of STATUS= and of status's "reason": "serving: machine 3, ring 64/4096
// (target 64)", "paused: machine 3, clock moved back 5 ms; it resumes by itself".
std::string StatusLine(uint32_t machine, const StatusFacts& facts);

class StatusReporter {
 public:
  // `identity`: the fields that never change (pid, version, dirs, register, machine...).
  // `board` (not owned) must outlive the reporter.
  StatusReporter(DaemonStatus identity, StatusBoard& board,
                 std::chrono::milliseconds status_interval);

  StatusBoard& board() noexcept { return board_; }
  Notifier& notifier() noexcept { return notifier_; }

  // Refreshes the board (every 50 ms or when `changed`) and sends STATUS= (every
  // status_interval or when `changed`) and WATCHDOG=1 when due.
  // `facts` is called only when something is due.
  void Report(const std::function<StatusFacts()>& facts, bool changed,
              std::chrono::steady_clock::time_point now);
  // The board now, whatever the schedule.
  void RefreshBoard(const StatusFacts& facts);
  std::string Line(const StatusFacts& facts) const;

 private:
  DaemonStatus identity_;
  StatusBoard& board_;
  Notifier notifier_;
  std::chrono::milliseconds status_interval_;
  std::chrono::steady_clock::time_point next_board_{};
  std::chrono::steady_clock::time_point next_status_{};
};

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_STATUS_REPORTER_H_
