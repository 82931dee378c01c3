#include "daemon/control/status_board.h"

#include <utility>

namespace snowflake::daemon {
void StatusBoard::Update(const DaemonStatus& status) {
  // Read outside the lock: Snapshot() callers never wait on a clock read. Time paused is
  // measured on the steady clock: a pause is when the wall clock steps.
  const int64_t now_ms = clock_.NowUnixMs();
  const auto steady_now = clock_.SteadyNow();
  std::lock_guard lock(mutex_);
  const bool changed = status_.state_since_unix_ms == 0 || status.state != status_.state ||
                       status.reason_code != status_.reason_code;
  const int64_t since = changed ? now_ms : status_.state_since_unix_ms;
  // The time since the last Update() counts for the state published then.
  if (updated_ && status_.state == "paused" && steady_now > *updated_) {
    paused_ms_[status_.reason_code] +=
        std::chrono::duration_cast<std::chrono::milliseconds>(steady_now - *updated_).count();
  }
  updated_ = steady_now;
  status_ = status;
  status_.state_since_unix_ms = since;
}

DaemonStatus StatusBoard::Snapshot() const {
  DaemonStatus out;
  {
    std::lock_guard lock(mutex_);
    out = status_;
  }
  std::lock_guard fronts_lock(fronts_mutex_);
  if (front_source_) out.fronts = front_source_();
  return out;
}

bool StatusBoard::HasStatus() const {
  std::lock_guard lock(mutex_);
  return updated_.has_value();
}

std::map<std::string, double> StatusBoard::PausedSeconds() const {
  std::lock_guard lock(mutex_);
  std::map<std::string, double> out;
  for (const auto& [reason, ms] : paused_ms_) out[reason] = static_cast<double>(ms) / 1000.0;
  return out;
}

void StatusBoard::SetAttachSource(AttachSource source) {
  std::lock_guard lock(attach_mutex_);
  attach_source_ = std::move(source);
}

std::optional<StatusBoard::AttachPoint> StatusBoard::AttachPointNow() const {
  std::lock_guard lock(attach_mutex_);
  if (!attach_source_) return std::nullopt;
  AttachPoint point = attach_source_();
  if (!point.region) return std::nullopt;
  return point;
}

void StatusBoard::SetFrontSource(FrontSource source) {
  std::lock_guard lock(fronts_mutex_);
  front_source_ = std::move(source);
}

uint64_t StatusBoard::RequestResume() noexcept {
  // acq_rel: tickets are unique and ordered; the loop's acquire load sees the request.
  return resume_requested_.fetch_add(1, std::memory_order_acq_rel) + 1;
}

void StatusBoard::ResumeHandled(uint64_t ticket, bool resumed) {
  {
    std::lock_guard lock(mutex_);
    if (ticket > resume_handled_) resume_handled_ = ticket;
    last_resume_effect_ = resumed;
  }
  resume_done_.notify_all();
}

std::optional<bool> StatusBoard::WaitForResume(uint64_t ticket, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!resume_done_.wait_for(lock, timeout, [&] { return resume_handled_ >= ticket; })) {
    return std::nullopt;
  }
  return last_resume_effect_;
}

}  // namespace snowflake::daemon
