#include "register/etcd_keepalive.h"

#include <algorithm>
#include <chrono>
#include <utility>

namespace snowflake::reg {

EtcdKeepAlive::EtcdKeepAlive(etcd::ClientOptions client, int64_t lease_ttl_s, Clock& clock)
    : client_(std::move(client)), lease_ttl_s_(lease_ttl_s), clock_(clock) {}

EtcdKeepAlive::~EtcdKeepAlive() { Stop(); }

void EtcdKeepAlive::Start(int64_t lease, uint32_t machine, Clock::SteadyTime granted) {
  thread_ = std::thread([this, lease, machine, granted] { Loop(lease, machine, granted); });
}

void EtcdKeepAlive::Stop() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::string EtcdKeepAlive::lost_reason() const {
  std::lock_guard lock(mutex_);
  return lost_reason_;
}

void EtcdKeepAlive::MarkLost(std::string reason) {
  {
    std::lock_guard lock(mutex_);
    lost_reason_ = std::move(reason);
  }
  lost_.store(true, std::memory_order_release);
}

void EtcdKeepAlive::Loop(int64_t lease, uint32_t machine, Clock::SteadyTime granted) {
  etcd::EtcdClient client(client_);
  const auto period = std::chrono::milliseconds(std::max<int64_t>(lease_ttl_s_ * 1000 / 3, 200));
  const auto retry = std::chrono::milliseconds(std::max<int64_t>(lease_ttl_s_ * 1000 / 10, 100));
  // The lease has run since its grant: renew a third of the TTL after it, or at once.
  auto wait = std::max(
      std::chrono::milliseconds(0),
      std::chrono::duration_cast<std::chrono::milliseconds>(granted + period - clock_.SteadyNow()));
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      if (wake_.wait_for(lock, wait, [this] { return stop_; })) return;
    }
    auto answer = client.KeepAlive(lease);
    if (answer && !answer->alive()) {
      std::lock_guard lock(mutex_);
      lost_reason_ = "the lease " + std::to_string(lease) + " of machine " +
                     std::to_string(machine) +
                     " expired in the etcd register (etcd was unreachable for longer than "
                     "register.etcd.lease_ttl_s, or the lease was revoked): stop serving and "
                     "claim anew";
      lost_.store(true, std::memory_order_release);
      return;
    }
    // Unanswered: try again soon, the lease is still running out.
    wait = answer ? period : retry;
  }
}

}  // namespace snowflake::reg
