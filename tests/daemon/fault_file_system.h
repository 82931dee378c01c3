// A FileSystem whose fsync can be made slow or failing at will (LevelDB's EnvWrapper
// style): the state file's real writes, renames and directory entries, with fsync
// delayed by `delay` and/or failing with `fail_errno`. Safe for concurrent use.
//
// A slow fsync can also be made to wait for a witness: something another thread must keep
// doing while the fsync lasts (the heartbeat beating, the fill loop passing). It then lasts
// `delay` and until the witness has changed `changes` times since the fsync began, so a
// test judges "that thread went on during the fsync" by the event, not by how much of a
// fixed delay the scheduler gave it. A witness that does not change for kWitnessPatience
// ends the fsync anyway and counts it in unwitnessed().

#ifndef SNOWFLAKE_TESTS_DAEMON_FAULT_FILE_SYSTEM_H_
#define SNOWFLAKE_TESTS_DAEMON_FAULT_FILE_SYSTEM_H_

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include "util/file_system.h"

namespace snowflake::testing {

class FaultFileSystem final : public util::FileSystem {
 public:
  // Far beyond any scheduling delay: a witness silent this long has stopped.
  static constexpr std::chrono::seconds kWitnessPatience{10};

  int Fsync(int fd) noexcept override {
    fsyncs_.fetch_add(1);
    const auto delay = std::chrono::milliseconds(delay_ms_.load());
    if (delay.count() > 0) Delay(delay);
    if (const int err = fail_errno_.load(); err != 0) {
      errno = err;
      return -1;
    }
    return util::FileSystem::Fsync(fd);
  }

  void SetDelay(std::chrono::milliseconds delay) { delay_ms_.store(delay.count()); }
  void SetFailure(int err) { fail_errno_.store(err); }
  // From the next slow fsync on, each also waits until `witness()` has returned `changes`
  // new values (read every millisecond, from the fsync's thread). An empty witness stops
  // the waiting, also of an fsync waiting now (which is then not judged): clear it once
  // waiting() is 0, before the witness's thread stops.
  void SetWitness(std::function<uint64_t()> witness, int changes) {
    std::lock_guard lock(mutex_);
    witness_ = std::move(witness);
    changes_ = changes;
  }
  int64_t fsyncs() const { return fsyncs_.load(); }
  // Slow fsyncs waiting for their witness now.
  int64_t waiting() const { return waiting_.load(); }
  // Slow fsyncs that saw their witness change `changes` times.
  int64_t witnessed() const { return witnessed_.load(); }
  // Slow fsyncs that waited for a witness and saw it change fewer than `changes` times in
  // kWitnessPatience.
  int64_t unwitnessed() const { return unwitnessed_.load(); }

 private:
  // The witness now, or an empty function.
  std::pair<std::function<uint64_t()>, int> Witness() {
    std::lock_guard lock(mutex_);
    return {witness_, changes_};
  }

  void Delay(std::chrono::milliseconds delay) {
    const auto start = std::chrono::steady_clock::now();
    auto [witness, wanted] = Witness();
    if (!witness) {
      std::this_thread::sleep_for(delay);
      return;
    }
    waiting_.fetch_add(1);
    uint64_t last = witness();
    auto last_change = start;
    int seen = 0;
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      const auto now = std::chrono::steady_clock::now();
      const auto current = Witness().first;
      if (!current) break;  // the test stopped watching: not judged
      if (const uint64_t value = current(); value != last) {
        last = value;
        last_change = now;
        ++seen;
      }
      if (now - start >= delay && seen >= wanted) {
        witnessed_.fetch_add(1);
        break;
      }
      if (now - last_change >= kWitnessPatience) {
        unwitnessed_.fetch_add(1);
        break;
      }
    }
    waiting_.fetch_sub(1);
  }

  std::mutex mutex_;
  std::function<uint64_t()> witness_;  // guarded by mutex_
  int changes_ = 0;                    // guarded by mutex_
  std::atomic<int64_t> waiting_{0};
  std::atomic<int64_t> witnessed_{0};
  std::atomic<int64_t> unwitnessed_{0};
  std::atomic<int64_t> delay_ms_{0};
  std::atomic<int> fail_errno_{0};
  std::atomic<int64_t> fsyncs_{0};
};

}  // namespace snowflake::testing

#endif  // SNOWFLAKE_TESTS_DAEMON_FAULT_FILE_SYSTEM_H_
