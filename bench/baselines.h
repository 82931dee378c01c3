// What users write instead of a daemon, measured next to it in the same binary and run:
// two in-process snowflake generators with the same 1/41/10/12 layout, both reading
// CLOCK_REALTIME on every call and waiting for the next millisecond once 4,096 IDs of
// one millisecond are used. Also the clocks and helpers every benchmark here shares.
//
// MutexSnowflake and CasSnowflake are safe for concurrent use by multiple threads of one
// process; they are baselines, not products (no clock-step policy, no persistence).

#ifndef SNOWFLAKE_BENCH_BASELINES_H_
#define SNOWFLAKE_BENCH_BASELINES_H_

#include <time.h>

#include <atomic>
#include <cstdint>
#include <mutex>

#include "snowflake/id_layout.h"

namespace snowflake::bench {

inline int64_t RealtimeNs() noexcept {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

inline int64_t RealtimeMs() noexcept { return RealtimeNs() / 1'000'000; }

inline int64_t MonotonicNs() noexcept {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

// Spins until CLOCK_REALTIME is past millisecond `unix_ms`; returns the new millisecond.
inline int64_t WaitForMsAfter(int64_t unix_ms) noexcept {
  int64_t now = RealtimeMs();
  while (now <= unix_ms) now = RealtimeMs();
  return now;
}

// Keeps `value` alive without a Google Benchmark dependency (the driver has none).
template <typename T>
inline void KeepValue(const T& value) noexcept {
  asm volatile("" : : "r,m"(value) : "memory");
}

// What a careful user writes by hand: one lock around clock, sequence and composition.
class MutexSnowflake {
 public:
  explicit MutexSnowflake(uint32_t machine) noexcept : machine_(machine) {}

  uint64_t Next() noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    int64_t now = RealtimeMs();
    if (now > last_ms_) {
      last_ms_ = now;
      sequence_ = 0;
    } else if (sequence_ > kLayout.max_sequence()) {
      // The ms is used up (or the clock stepped back): never borrow a future millisecond.
      last_ms_ = WaitForMsAfter(last_ms_);
      sequence_ = 0;
    }
    return kLayout.EncodeUnchecked(last_ms_ - kDefaultEpochUnixMs, machine_, sequence_++);
  }

 private:
  static constexpr IdLayout kLayout{};  // the default: the classic design's
  std::mutex mutex_;
  const uint32_t machine_;
  int64_t last_ms_ = 0;     // guarded by mutex_
  uint32_t sequence_ = 0;   // next sequence of last_ms_; guarded by mutex_
};

// The lock-free variant: one 64-bit atomic holds the last issued (ms offset, sequence)
// as (ms << sequence bits) | sequence, advanced by compare-and-swap.
class CasSnowflake {
 public:
  explicit CasSnowflake(uint32_t machine) noexcept : machine_(machine) {}

  uint64_t Next() noexcept {
    uint64_t seen = state_.load(std::memory_order_relaxed);
    for (;;) {
      const int64_t now = RealtimeMs() - kDefaultEpochUnixMs;
      const int64_t seen_ms = static_cast<int64_t>(seen >> kSequenceWidth);
      uint64_t next;
      if (now > seen_ms) {
        next = static_cast<uint64_t>(now) << kSequenceWidth;
      } else if ((seen & kLayout.max_sequence()) < kLayout.max_sequence()) {
        // Same ms (or the clock is behind the last issued ms): the next sequence.
        next = seen + 1;
      } else {
        WaitForMsAfter(seen_ms + kDefaultEpochUnixMs);
        seen = state_.load(std::memory_order_relaxed);
        continue;
      }
      // Cases: (1) the CAS wins: no one issued after `seen`, so `next` is ours. (2) it
      // loses: `seen` now holds the newer state; retry from it. Relaxed suffices: only
      // uniqueness and order of this one variable matter, and every RMW on it is totally
      // ordered.
      if (state_.compare_exchange_weak(seen, next, std::memory_order_relaxed,
                                       std::memory_order_relaxed)) {
        return kLayout.EncodeUnchecked(static_cast<int64_t>(next >> kSequenceWidth), machine_,
                                       static_cast<uint32_t>(next & kLayout.max_sequence()));
      }
    }
  }

 private:
  static constexpr IdLayout kLayout{};  // the default: the classic design's
  static constexpr int kSequenceWidth = kLayout.bits().sequence;
  const uint32_t machine_;
  alignas(64) std::atomic<uint64_t> state_{0};
};

}  // namespace snowflake::bench

#endif  // SNOWFLAKE_BENCH_BASELINES_H_
