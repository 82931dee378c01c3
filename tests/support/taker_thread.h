// One thread taking IDs from a daemon through a Client until stopped, keeping every ID
// with the phase the test was in when its take began (SetPhase) and its millisecond. The
// daemon tests use it as their steady demand: a modest, steady taker keeps the daemon
// issuing in the current millisecond.
//
// Header-only: the tests that use it link the client library already.
// Thread-safety: every method is safe from the test's thread while the taker runs.

#ifndef SNOWFLAKE_TESTS_SUPPORT_TAKER_THREAD_H_
#define SNOWFLAKE_TESTS_SUPPORT_TAKER_THREAD_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "snowflake/client.h"

namespace snowflake::testing {

class TakerThread {
 public:
  struct Options {
    // Pauses after a take and after a failed one (0: none). 50 µs / 200 µs make about
    // 10-20 k takes/s: demand on every fill pass, bounded memory.
    std::chrono::microseconds after_take{0};
    std::chrono::microseconds after_error{0};
  };
  struct Taken {
    uint64_t id;
    int phase;
    int64_t unix_ms;
  };

  explicit TakerThread(Client client) : TakerThread(std::move(client), Options{}) {}
  TakerThread(Client client, Options options)
      : client_(std::move(client)), options_(options), thread_([this] { Run(); }) {}
  ~TakerThread() { Stop(); }
  TakerThread(const TakerThread&) = delete;
  TakerThread& operator=(const TakerThread&) = delete;

  // Takes that begin from now on are of `phase`.
  void SetPhase(int phase) { phase_.store(phase); }
  // Ends the thread (idempotent); what it took stays readable.
  void Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }

  std::vector<Taken> taken() const {
    std::lock_guard lock(mutex_);
    return taken_;
  }
  std::vector<uint64_t> ids() const {
    std::lock_guard lock(mutex_);
    std::vector<uint64_t> ids;
    ids.reserve(taken_.size());
    for (const Taken& t : taken_) ids.push_back(t.id);
    return ids;
  }
  size_t CountInPhase(int phase) const {
    std::lock_guard lock(mutex_);
    size_t count = 0;
    for (const Taken& t : taken_) count += t.phase == phase ? 1 : 0;
    return count;
  }
  // The largest millisecond among the IDs taken so far (0: none).
  int64_t max_ms() const { return max_ms_.load(); }
  // Takes that failed (paused, stopped or gone: the test's deadline bounds the wait).
  uint64_t errors() const { return errors_.load(); }
  const Client& client() const { return client_; }

 private:
  void Run() {
    while (!stop_.load()) {
      const int phase = phase_.load();
      auto id = client_.Next();
      if (!id) {
        errors_.fetch_add(1);
        if (options_.after_error.count() > 0) std::this_thread::sleep_for(options_.after_error);
        continue;
      }
      const auto fields = client_.Decode(*id);
      const int64_t unix_ms = fields ? fields->unix_ms : 0;
      {
        std::lock_guard lock(mutex_);
        taken_.push_back({*id, phase, unix_ms});
      }
      if (unix_ms > max_ms_.load()) max_ms_.store(unix_ms);
      if (options_.after_take.count() > 0) std::this_thread::sleep_for(options_.after_take);
    }
  }

  Client client_;
  const Options options_;
  std::atomic<int> phase_{0};
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> errors_{0};
  std::atomic<int64_t> max_ms_{0};
  mutable std::mutex mutex_;
  std::vector<Taken> taken_;  // guarded by mutex_
  std::thread thread_;        // last: it starts once every member above is made
};

}  // namespace snowflake::testing

#endif  // SNOWFLAKE_TESTS_SUPPORT_TAKER_THREAD_H_
