#include "daemon/control/status_reporter.h"

#include "daemon/core/state_words.h"

namespace snowflake::daemon {

using shm::DaemonState;

std::string StatusLine(uint32_t machine, const StatusFacts& facts) {
  const std::string head = std::string(StateText(facts.decision.state)) + ": machine " +
                           std::to_string(machine);
  if (facts.decision.state == DaemonState::kServing) {
    return head + ", ring " + std::to_string(facts.ring_fill) + "/" +
           std::to_string(facts.ring_capacity) + " (target " + std::to_string(facts.fill_target) +
           ")";
  }
  if (facts.decision.state == DaemonState::kStarting ||
      facts.decision.state == DaemonState::kStopped) {
    return head;
  }
  std::string line = head + ", " +
                     DescribeReason(facts.decision.reason, facts.decision.detail, facts.reason_extra,
                                    facts.now_unix_ms);
  const std::string_view next = RecoveryText(RecoveryFor(facts.decision.state));
  if (!next.empty()) line += "; " + std::string(next);
  return line;
}

StatusReporter::StatusReporter(DaemonStatus identity, StatusBoard& board,
                               std::chrono::milliseconds status_interval)
    : identity_(std::move(identity)), board_(board), status_interval_(status_interval) {}

std::string StatusReporter::Line(const StatusFacts& facts) const {
  return StatusLine(static_cast<uint32_t>(identity_.machine), facts);
}

void StatusReporter::RefreshBoard(const StatusFacts& f) {
  DaemonStatus s = identity_;
  s.state = std::string(vocab::StateCode(f.decision.state));
  s.reason_code = std::string(vocab::ReasonCode(f.decision.reason));
  s.reason = f.decision.state == DaemonState::kServing ? "" : Line(f);
  s.reason_detail = f.decision.detail;
  s.ring_capacity = f.ring_capacity;
  s.ring_fill = f.ring_fill;
  s.fill_target = f.fill_target;
  s.published_total = f.published_total;
  s.drained_total = f.drained_total;
  s.incarnation = f.incarnation;
  s.last_issued_id = f.last_issued_id;
  s.generator_mark_unix_ms = f.generator_mark_unix_ms;
  s.reserved_through_unix_ms = f.reserved_through_unix_ms;
  s.clock_pauses = f.clock_pauses;
  s.clock_behind_ms = f.clock_behind_ms;
  s.services = f.services;
  s.segments_retired = f.segments_retired;
  s.segment_retired_reason = f.segment_retired_reason;
  s.renewal = f.renewal;
  s.clock_wait = f.clock_wait;
  board_.Update(s);
}

void StatusReporter::Report(const std::function<StatusFacts()>& facts, bool changed,
                            std::chrono::steady_clock::time_point now) {
  notifier_.MaybeWatchdog(now);
  const bool board_due = changed || now >= next_board_;
  const bool status_due = changed || now >= next_status_;
  if (!board_due && !status_due) return;
  const StatusFacts f = facts();
  if (board_due) {
    RefreshBoard(f);
    next_board_ = now + std::chrono::milliseconds(50);
  }
  if (status_due) {
    notifier_.Status(Line(f));
    next_status_ = now + status_interval_;
  }
}

}  // namespace snowflake::daemon
