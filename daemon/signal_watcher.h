// SIGTERM and SIGINT, collected by one thread with sigtimedwait: the constructor blocks
// them in the calling thread (and so in every thread started after it), so no
// async-signal-safety puzzle arises; the fill loop polls stop_requested() once per pass,
// and SetOnStop() lets the watcher cut the loop's wait short.
//
// Construct it before any other thread starts. Accessors are safe from any thread.

#ifndef SNOWFLAKE_DAEMON_SIGNAL_WATCHER_H_
#define SNOWFLAKE_DAEMON_SIGNAL_WATCHER_H_

#include <signal.h>

#include <atomic>
#include <functional>
#include <mutex>
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
  // Called on the watcher's thread right after a stop signal sets the flag (e.g. to wake
  // the fill loop). Clear it (an empty function) before what it touches is destroyed.
  void SetOnStop(std::function<void()> on_stop);

 private:
  sigset_t set_{};
  std::atomic<bool> quit_{false};
  std::atomic<bool> stop_{false};
  std::atomic<int> signal_{0};
  std::mutex on_stop_mutex_;
  std::function<void()> on_stop_;
  std::thread thread_;
};

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_SIGNAL_WATCHER_H_
