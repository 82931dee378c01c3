#include "daemon/instance_lock.h"

namespace snowflake::daemon {

tl::expected<util::FileLock, InstanceLockError> AcquireInstanceLock(
    const std::filesystem::path& runtime_dir) noexcept {
  try {
    auto lock = util::FileLock::Acquire(runtime_dir / kInstanceLockFileName, /*wait=*/false,
                                        /*write_pid=*/true, 0644);
    if (lock) return std::move(*lock);
    if (lock.error().held_by_other) {
      const std::string who = lock.error().holder_pid
                                  ? "pid " + std::to_string(*lock.error().holder_pid)
                                  : std::string("pid unknown");
      return tl::unexpected(InstanceLockError{
          true, "another snowflaked (" + who + ") already serves " + runtime_dir.string()});
    }
    return tl::unexpected(
        InstanceLockError{false, "cannot take the instance lock: " + lock.error().message});
  } catch (const std::exception& e) {
    return tl::unexpected(InstanceLockError{false, e.what()});
  }
}

}  // namespace snowflake::daemon
