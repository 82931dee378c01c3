// Only one snowflaked serves a runtime directory: it holds an exclusive flock on
// <runtime_dir>/snowflaked.lock (with its pid inside) for its whole life. The kernel drops
// the lock when the process dies, so a SIGKILLed daemon never blocks its successor.

#ifndef SNOWFLAKE_DAEMON_INSTANCE_LOCK_H_
#define SNOWFLAKE_DAEMON_INSTANCE_LOCK_H_

#include <filesystem>
#include <string>
#include <tl/expected.hpp>

#include "util/file_lock.h"

namespace snowflake::daemon {

inline constexpr std::string_view kInstanceLockFileName = "snowflaked.lock";

struct InstanceLockError {
  bool already_running;  // another daemon holds it (exit status 2); else a system error
  std::string message;   // "another snowflaked (pid P) already serves DIR"
};

// Takes the lock without waiting. Thread-safe (distinct calls make distinct locks, and a
// second call in one process fails like a second daemon would).
// Errors: already_running; a system error creating or locking the file.
[[nodiscard]] tl::expected<util::FileLock, InstanceLockError> AcquireInstanceLock(
    const std::filesystem::path& runtime_dir) noexcept;

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_INSTANCE_LOCK_H_
