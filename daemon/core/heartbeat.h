// The heartbeat: its own thread stores CLOCK_MONOTONIC into the segment's heartbeat every
// liveness_ms / 10, whatever the fill loop is doing (a burst, a long fill), so clients on
// a busy host are not told "not heartbeating" while the daemon is well (docs/daemon.md,
// "Liveness"). It still tells the truth about a stuck daemon: it beats only while the
// fill loop has finished a pass within `stall_limit`, so a hung loop stops the beat and
// clients fail over. A stopped (SIGSTOP) or dead process stops every thread, the beat too.
//
// Threads: Start()/Stop() from the main thread; the beat thread calls only
// shm::RingProducer::Heartbeat() (one relaxed store into the segment, safe beside the
// fill loop's use of the producer), under mutex_. NotePass() and Hold() are called by the
// fill loop.

#ifndef SNOWFLAKE_DAEMON_CORE_HEARTBEAT_H_
#define SNOWFLAKE_DAEMON_CORE_HEARTBEAT_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "snowflake/clock.h"
#include "snowflake/ring_producer.h"

namespace snowflake::daemon {

class Heartbeat {
 public:
  // `producer` and `clock` (not owned) must outlive the Heartbeat. The stall is measured
  // on clock.SteadyNow(), so a test can step it. REQUIRES: interval > 0,
  // stall_limit > interval.
  Heartbeat(shm::RingProducer& producer, std::chrono::microseconds interval,
            std::chrono::milliseconds stall_limit, Clock& clock);
  ~Heartbeat();  // Stop()s
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  void Start();
  void Stop();

  // The fill loop finished a pass. One relaxed store.
  void NotePass() noexcept;

  // No beat happens while the returned lock is held: the fill loop holds it while it
  // replaces the producer object the beat thread writes through (a tampered segment).
  [[nodiscard]] std::unique_lock<std::mutex> Hold() { return std::unique_lock(mutex_); }

  uint64_t beats() const noexcept { return beats_.load(std::memory_order_relaxed); }

 private:
  void Run();
  int64_t SteadyNs() noexcept;

  // Constant after construction.
  shm::RingProducer& producer_;
  Clock& clock_;
  const std::chrono::microseconds interval_;
  const std::chrono::milliseconds stall_limit_;

  // Written by the fill loop, read by the beat thread: steady ns of the last pass.
  std::atomic<int64_t> last_pass_ns_;
  std::atomic<uint64_t> beats_{0};

  // Protected by mutex_.
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;

  std::thread thread_;
};

// liveness_ms / 10, at least 1 ms: the beat interval for daemon.liveness_ms.
std::chrono::microseconds BeatIntervalFor(int64_t liveness_ms) noexcept;

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_CORE_HEARTBEAT_H_
