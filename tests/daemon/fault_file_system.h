// A FileSystem whose fsync can be made slow or failing at will (LevelDB's EnvWrapper
// style): the state file's real writes, renames and directory entries, with fsync
// delayed by `delay` and/or failing with `fail_errno`. Safe for concurrent use.

#ifndef SNOWFLAKE_TESTS_DAEMON_FAULT_FILE_SYSTEM_H_
#define SNOWFLAKE_TESTS_DAEMON_FAULT_FILE_SYSTEM_H_

#include <atomic>
#include <cerrno>
#include <chrono>
#include <thread>

#include "base/file_system.h"

namespace snowflake::testing {

class FaultFileSystem final : public daemon::FileSystem {
 public:
  int Fsync(int fd) noexcept override {
    fsyncs_.fetch_add(1);
    const auto delay = std::chrono::milliseconds(delay_ms_.load());
    if (delay.count() > 0) std::this_thread::sleep_for(delay);
    if (const int err = fail_errno_.load(); err != 0) {
      errno = err;
      return -1;
    }
    return daemon::FileSystem::Fsync(fd);
  }

  void SetDelay(std::chrono::milliseconds delay) { delay_ms_.store(delay.count()); }
  void SetFailure(int err) { fail_errno_.store(err); }
  int64_t fsyncs() const { return fsyncs_.load(); }

 private:
  std::atomic<int64_t> delay_ms_{0};
  std::atomic<int> fail_errno_{0};
  std::atomic<int64_t> fsyncs_{0};
};

}  // namespace snowflake::testing

#endif  // SNOWFLAKE_TESTS_DAEMON_FAULT_FILE_SYSTEM_H_
