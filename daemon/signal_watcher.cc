#include "daemon/signal_watcher.h"

#include <pthread.h>

#include <ctime>
#include <utility>

namespace snowflake::daemon {

SignalWatcher::SignalWatcher() {
  sigemptyset(&set_);
  sigaddset(&set_, SIGTERM);
  sigaddset(&set_, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set_, nullptr);
  thread_ = std::thread([this] {
    while (!quit_.load(std::memory_order_relaxed)) {
      // Bounded, so the destructor's join is too.
      const timespec timeout{0, 50'000'000};
      const int sig = sigtimedwait(&set_, nullptr, &timeout);
      if (sig > 0) {
        signal_.store(sig, std::memory_order_relaxed);
        // Release: pairs with stop_requested(); signal_ is read after it.
        stop_.store(true, std::memory_order_release);
        const std::lock_guard<std::mutex> lock(on_stop_mutex_);
        if (on_stop_) on_stop_();
      }
    }
  });
}

void SignalWatcher::SetOnStop(std::function<void()> on_stop) {
  const std::lock_guard<std::mutex> lock(on_stop_mutex_);
  on_stop_ = std::move(on_stop);
}

SignalWatcher::~SignalWatcher() {
  quit_.store(true, std::memory_order_relaxed);
  thread_.join();
}

}  // namespace snowflake::daemon
