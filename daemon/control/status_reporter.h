// Status and notifications: the snapshot the control socket serves (StatusBoard), STATUS=
// and WATCHDOG=1 to systemd (Notifier), composed from one set of facts the fill loop
// hands over, in the words of daemon/core/state_words.h.
//
// Not thread-safe: the fill loop owns it (the StatusBoard inside is shared with the
// control socket and is thread-safe itself).

#ifndef SNOWFLAKE_DAEMON_CONTROL_STATUS_REPORTER_H_
#define SNOWFLAKE_DAEMON_CONTROL_STATUS_REPORTER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "daemon/control/notifier.h"
#include "daemon/control/status_board.h"
#include "daemon/core/status_sink.h"

namespace snowflake::daemon {

// The one-line text of STATUS= and of status's "reason": "serving: machine 3, ring 64/4096
// (target 64)", "paused: machine 3, clock moved back 5 ms; it resumes by itself".
std::string StatusLine(uint32_t machine, const StatusFacts& facts);

class StatusReporter final : public StatusSink {
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
              std::chrono::steady_clock::time_point now) override;
  // The board now, whatever the schedule.
  void RefreshBoard(const StatusFacts& facts) override;
  std::string Line(const StatusFacts& facts) const override;
  uint64_t resume_requested() const noexcept override { return board_.resume_requested(); }
  void ResumeHandled(uint64_t ticket, bool resumed) override {
    board_.ResumeHandled(ticket, resumed);
  }

 private:
  DaemonStatus identity_;
  StatusBoard& board_;
  Notifier notifier_;
  std::chrono::milliseconds status_interval_;
  std::chrono::steady_clock::time_point next_board_{};
  std::chrono::steady_clock::time_point next_status_{};
};

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_CONTROL_STATUS_REPORTER_H_
