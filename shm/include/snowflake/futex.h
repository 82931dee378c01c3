// Shared (inter-process) futex wait and wake on a 32-bit atomic in a shared mapping.
// Never uses FUTEX_PRIVATE_FLAG: a private wait is never woken from another process.
// Both are thread-safe system calls; use them only off the fast path.

#ifndef SNOWFLAKE_FUTEX_H_
#define SNOWFLAKE_FUTEX_H_

#include <atomic>
#include <chrono>
#include <cstdint>

namespace snowflake::shm {

enum class FutexWaitResult {
  kWoken,        // woken by FutexWake (or spuriously; re-check the condition)
  kValueChanged, // *word != expected when the wait began
  kTimedOut,
  kInterrupted,  // a signal arrived
};

// Sleeps while *word == expected, for at most `timeout` (every wait has one).
FutexWaitResult FutexWait(const std::atomic<uint32_t>& word, uint32_t expected,
                          std::chrono::nanoseconds timeout) noexcept;

// Wakes up to `count` waiters on `word`. Returns how many were woken.
int FutexWake(const std::atomic<uint32_t>& word, int count) noexcept;

// The waker's half of a handshake on `word`: adds 1 (seq_cst), then wakes up to `count`
// waiters. A waiter that has not slept yet finds the word changed and does not sleep.
void FutexBumpAndWake(std::atomic<uint32_t>& word, int count) noexcept;

}  // namespace snowflake::shm

#endif  // SNOWFLAKE_FUTEX_H_
