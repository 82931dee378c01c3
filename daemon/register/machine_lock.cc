#include "daemon/register/machine_lock.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

namespace snowflake::daemon {
namespace {

// Sticky and writable by all, like /run/lock itself: daemons of different users create
// their numbers' files here, and none can remove another's.
constexpr mode_t kDirMode = 01777;

LockFailure DirFailure(const std::filesystem::path& dir, const std::string& what, int err) {
  return LockFailure{
      false, std::nullopt,
      "cannot use the host-wide machine-number lock directory " + dir.string() + " (" + what +
          ": " + std::strerror(err) +
          "): every daemon of this host locks its number there. Create it with `systemd-tmpfiles "
          "--create snowflaked.conf` (or `install -d -m 1777 " +
          dir.string() + "`)" +
          (std::getenv(kHostLockDirEnv) != nullptr ? std::string(" or fix ") + kHostLockDirEnv
                                                   : std::string())};
}

tl::expected<void, LockFailure> EnsureDir(const std::filesystem::path& dir) {
  struct stat info {};
  if (lstat(dir.c_str(), &info) == 0) {
    if (!S_ISDIR(info.st_mode)) return tl::unexpected(DirFailure(dir, "not a directory", ENOTDIR));
    return {};
  }
  if (errno != ENOENT) return tl::unexpected(DirFailure(dir, "stat", errno));
  if (mkdir(dir.c_str(), kDirMode) != 0 && errno != EEXIST) {
    return tl::unexpected(DirFailure(dir, "mkdir", errno));
  }
  // mkdir applies the umask; the mode must be exact so other users' daemons can lock here.
  // Only the creator can chmod: a directory another user made first keeps its mode.
  struct stat made {};
  if (lstat(dir.c_str(), &made) == 0 && made.st_uid == geteuid() &&
      (made.st_mode & 07777) != kDirMode) {
    chmod(dir.c_str(), kDirMode);
  }
  return {};
}

}  // namespace

std::filesystem::path HostLockDir() {
  const char* env = std::getenv(kHostLockDirEnv);
  if (env != nullptr && *env != '\0') return std::filesystem::path(env);
  return std::filesystem::path(kDefaultHostLockDir);
}

std::filesystem::path MachineLockPath(const std::filesystem::path& dir, uint32_t machine) {
  return dir / ("machine-" + std::to_string(machine) + ".lock");
}

tl::expected<FileLock, LockFailure> AcquireMachineLock(const std::filesystem::path& dir,
                                                       uint32_t machine) noexcept {
  try {
    if (auto made = EnsureDir(dir); !made) return tl::unexpected(made.error());
    auto lock = FileLock::Acquire(MachineLockPath(dir, machine), /*wait=*/false,
                                  /*write_pid=*/true, 0644);
    if (!lock && !lock.error().held_by_other) {
      LockFailure failure = std::move(lock.error());
      failure.message += " (the host-wide machine-number lock directory " + dir.string() +
                         " must let this user create and open files: mode 1777)";
      return tl::unexpected(std::move(failure));
    }
    return lock;
  } catch (const std::exception& e) {
    return tl::unexpected(LockFailure{false, std::nullopt, e.what()});
  }
}

bool IsMachineLocked(const std::filesystem::path& dir, uint32_t machine,
                     std::optional<pid_t>* holder_pid) noexcept {
  try {
    return FileLock::IsHeld(MachineLockPath(dir, machine), holder_pid);
  } catch (...) {
    return false;
  }
}

}  // namespace snowflake::daemon
