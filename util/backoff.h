// Jittered exponential backoff for retrying a register that does not answer (the etcd
// register unreachable at startup). The nominal delay starts at `first` and doubles up to
// `cap`; each delay handed out is drawn uniformly from [nominal / 2, nominal] ("equal
// jitter"), so a fleet restarted together does not hammer etcd in lockstep and no delay
// is ever longer than `cap`.
//
// Not thread-safe: one retry loop owns it.

#ifndef SNOWFLAKE_UTIL_BACKOFF_H_
#define SNOWFLAKE_UTIL_BACKOFF_H_

#include <chrono>
#include <cstdint>
#include <random>

namespace snowflake::util {

class Backoff {
 public:
  // REQUIRES: 0 < first <= cap.
  Backoff(std::chrono::milliseconds first, std::chrono::milliseconds cap, uint64_t seed);

  // The next delay: in [nominal / 2, nominal], nominal = min(cap, first * 2^calls).
  std::chrono::milliseconds Next();

 private:
  const std::chrono::milliseconds cap_;
  std::chrono::milliseconds nominal_;
  std::mt19937_64 random_;
};

// The daemon's schedule while it waits for the register at startup (docs/daemon.md).
inline constexpr std::chrono::milliseconds kRegisterRetryFirst{200};
inline constexpr std::chrono::milliseconds kRegisterRetryCap{5000};

}  // namespace snowflake::util

#endif  // SNOWFLAKE_UTIL_BACKOFF_H_
