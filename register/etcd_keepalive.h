// The etcd register's lease keepalive (etcd_register.h): a thread that renews the claim's
// lease every lease_ttl_s / 3 over its own connection, and the claim's "lost" flag with
// its reason, which the keepalive sets when it finds the lease gone and the register's
// raises set when their lease comparison fails.
//
// Thread-safety: Start() and Stop() are called by the register's owner thread (the claim,
// the destructor); lost(), lost_reason() and MarkLost() may be called from any thread.

#ifndef SNOWFLAKE_REGISTER_ETCD_KEEPALIVE_H_
#define SNOWFLAKE_REGISTER_ETCD_KEEPALIVE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "register/etcd_client.h"
#include "snowflake/clock.h"

namespace snowflake::reg {

class EtcdKeepAlive {
 public:
  // `client`: the options of the thread's own connection; the period is derived from
  // `lease_ttl_s`; `clock` (the register's, outliving this) says how long the lease has
  // run since its grant. The waits between renewals are real time on a condition variable,
  // so that Stop() ends them at once. Starts nothing.
  EtcdKeepAlive(etcd::ClientOptions client, int64_t lease_ttl_s, Clock& clock);
  // Stop().
  ~EtcdKeepAlive();
  EtcdKeepAlive(const EtcdKeepAlive&) = delete;
  EtcdKeepAlive& operator=(const EtcdKeepAlive&) = delete;

  // Starts the thread renewing `lease`, the lease of the claim of `machine` (named in the
  // reason when it is gone), granted at `granted` (the clock's SteadyNow() when the grant
  // was asked for): the first renewal comes a third of the
  // TTL after the grant, at once if the claim took longer (a slow claim in a storm must
  // not let its lease run out before the first renewal). REQUIRES: called once.
  void Start(int64_t lease, uint32_t machine, Clock::SteadyTime granted);
  // Ends the thread (if started) and waits for it; idempotent.
  void Stop();

  // Set (for good) once the claim is known to be gone.
  bool lost() const noexcept { return lost_.load(std::memory_order_acquire); }
  // Why it is gone ("" while it is not).
  std::string lost_reason() const;
  // The claim is gone for `reason`: lost() from now on.
  void MarkLost(std::string reason);

 private:
  void Loop(int64_t lease, uint32_t machine, Clock::SteadyTime granted);

  // Constant after construction.
  const etcd::ClientOptions client_;
  const int64_t lease_ttl_s_;
  Clock& clock_;

  // Shared between the keepalive thread and the register's callers.
  // Release on set, acquire on read: whoever sees it set also sees the reason written
  // before it (under mutex_ as well).
  std::atomic<bool> lost_{false};
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;        // guarded by mutex_
  std::string lost_reason_;  // guarded by mutex_
  std::thread thread_;       // started and joined by the owner thread only
};

}  // namespace snowflake::reg

#endif  // SNOWFLAKE_REGISTER_ETCD_KEEPALIVE_H_
