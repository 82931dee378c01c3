#include "status_board.h"

namespace snowflake {

void StatusBoard::Update(const DaemonStatus& status) {
  std::lock_guard lock(mutex_);
  status_ = status;
}

DaemonStatus StatusBoard::Snapshot() const {
  std::lock_guard lock(mutex_);
  return status_;
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

}  // namespace snowflake
