#include "daemon/core/heartbeat.h"

#include "util/debug_assert.h"

namespace snowflake::daemon {
std::chrono::microseconds BeatIntervalFor(int64_t liveness_ms) noexcept {
  return std::max(std::chrono::microseconds(1000), std::chrono::microseconds(liveness_ms * 100));
}

Heartbeat::Heartbeat(shm::RingProducer& producer, std::chrono::microseconds interval,
                     std::chrono::milliseconds stall_limit, Clock& clock)
    : producer_(producer),
      clock_(clock),
      interval_(interval),
      stall_limit_(stall_limit),
      last_pass_ns_(SteadyNs()) {
  SNOWFLAKE_REQUIRE(interval.count() > 0);
  SNOWFLAKE_REQUIRE(stall_limit > interval);
}

Heartbeat::~Heartbeat() { Stop(); }

void Heartbeat::Start() {
  SNOWFLAKE_REQUIRE(!thread_.joinable());
  thread_ = std::thread([this] { Run(); });
}

void Heartbeat::Stop() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

int64_t Heartbeat::SteadyNs() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_.SteadyNow().time_since_epoch())
      .count();
}

void Heartbeat::NotePass() noexcept {
  // Relaxed: only compared with a clock; no data is published through it.
  last_pass_ns_.store(SteadyNs(), std::memory_order_relaxed);
}

void Heartbeat::Run() {
  std::unique_lock lock(mutex_);
  while (!stop_) {
    // Under the lock: Hold() keeps the producer still while the fill loop replaces it.
    const int64_t since_pass = SteadyNs() - last_pass_ns_.load(std::memory_order_relaxed);
    if (since_pass < std::chrono::nanoseconds(stall_limit_).count()) {
      producer_.Heartbeat();
      beats_.fetch_add(1, std::memory_order_relaxed);
    }
    wake_.wait_for(lock, interval_, [this] { return stop_; });
  }
}

}  // namespace snowflake::daemon
