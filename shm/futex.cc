#include "snowflake/futex.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <ctime>

namespace snowflake::shm {
namespace {

// The kernel reads the word through its address; std::atomic<uint32_t> is layout-
// compatible with uint32_t (static_assert'ed in segment_layout.h).
uint32_t* WordAddress(const std::atomic<uint32_t>& word) {
  return reinterpret_cast<uint32_t*>(const_cast<std::atomic<uint32_t>*>(&word));
}

}  // namespace

FutexWaitResult FutexWait(const std::atomic<uint32_t>& word, uint32_t expected,
                          std::chrono::nanoseconds timeout) noexcept {
  if (timeout.count() < 0) timeout = std::chrono::nanoseconds(0);
  timespec relative{
      .tv_sec = static_cast<time_t>(timeout.count() / 1'000'000'000),
      .tv_nsec = static_cast<long>(timeout.count() % 1'000'000'000),
  };
  // FUTEX_WAIT (not FUTEX_WAIT_PRIVATE): the waker is another process. A read-only
  // mapping is enough for a wait.
  const long rc = syscall(SYS_futex, WordAddress(word), FUTEX_WAIT, expected, &relative,
                          nullptr, 0);
  if (rc == 0) return FutexWaitResult::kWoken;
  switch (errno) {
    case EAGAIN:
      return FutexWaitResult::kValueChanged;
    case ETIMEDOUT:
      return FutexWaitResult::kTimedOut;
    case EINTR:
      return FutexWaitResult::kInterrupted;
    default:
      // EFAULT/EINVAL would be a bug in our mapping; the caller re-checks state and
      // its deadline, so report it as a timeout rather than spin.
      return FutexWaitResult::kTimedOut;
  }
}

int FutexWake(const std::atomic<uint32_t>& word, int count) noexcept {
  const long rc = syscall(SYS_futex, WordAddress(word), FUTEX_WAKE, count, nullptr, nullptr, 0);
  return rc < 0 ? 0 : static_cast<int>(rc);
}

void FutexBumpAndWake(std::atomic<uint32_t>& word, int count) noexcept {
  word.fetch_add(1, std::memory_order_seq_cst);
  FutexWake(word, count);
}

}  // namespace snowflake::shm
