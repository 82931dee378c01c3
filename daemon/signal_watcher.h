// SIGTERM and SIGINT, collected by one thread with sigtimedwait: the constructor blocks
// them in the calling thread (and so in every thread started after it), so no
// async-signal-safety puzzle arises; the fill loop polls stop_requested() once per pass.
//
// Construct it before any other thread starts. Accessors are safe from any thread.

#ifndef SNOWFLAKE_DAEMON_SIGNAL_WATCHER_H_
#define SNOWFLAKE_DAEMON_SIGNAL_WATCHER_H_

#include <signal.h>

#include <atomic>
#include <thread>

namespace snowflake::daemon {

class SignalWatcher {
 public:
  SignalWatcher();
  ~SignalWatcher();
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

  bool stop_requested() const noexcept { return stop_.load(std::memory_order_acquire); }
  int signal_number() const noexcept { return signal_.load(std::memory_order_relaxed); }
  const std::atomic<bool>& stop_flag() const noexcept { return stop_; }

 private:
  sigset_t set_{};
  std::atomic<bool> quit_{false};
  std::atomic<bool> stop_{false};
  std::atomic<int> signal_{0};
  std::thread thread_;
};

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_SIGNAL_WATCHER_H_
