#include "register/machine_lock.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "base/atomic_file.h"

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

namespace {

std::string HostMarkPrefix(uint32_t machine) { return "machine-" + std::to_string(machine) + "."; }
constexpr std::string_view kHostMarkSuffix = ".high-water";

}  // namespace

tl::expected<void, std::string> WriteHostMark(const std::filesystem::path& dir, uint32_t machine,
                                              const HostMark& mark) noexcept {
  try {
    if (auto made = EnsureDir(dir); !made) {
      return tl::unexpected("cannot write the host mark: " + made.error().message);
    }
    const std::filesystem::path path =
        dir / (HostMarkPrefix(machine) + std::to_string(geteuid()) + std::string(kHostMarkSuffix));
    const nlohmann::json doc = {{"unix_ms", mark.unix_ms}, {"writer", mark.writer}};
    auto written = WriteFileAtomically(
        path, doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n", 0644);
    if (!written) return tl::unexpected("cannot write the host mark: " + written.error());
    return {};
  } catch (const std::exception& e) {
    return tl::unexpected(std::string("cannot write the host mark: ") + e.what());
  }
}

tl::expected<std::optional<HostMark>, std::string> ReadHostMark(const std::filesystem::path& dir,
                                                                uint32_t machine) noexcept {
  try {
    const std::string prefix = HostMarkPrefix(machine);
    std::optional<HostMark> highest;
    std::error_code ec;
    std::filesystem::directory_iterator it(dir, ec), end;
    if (ec) {
      if (ec == std::errc::no_such_file_or_directory) return highest;
      return tl::unexpected("cannot list " + dir.string() + " for host marks: " + ec.message());
    }
    for (; it != end; it.increment(ec)) {
      if (ec) return tl::unexpected("cannot list " + dir.string() + ": " + ec.message());
      const std::string name = it->path().filename().string();
      // machine-N.U.high-water, U all digits: machine-1.high-water is not machine-12's.
      if (!name.starts_with(prefix) || !name.ends_with(kHostMarkSuffix)) continue;
      const std::string uid =
          name.substr(prefix.size(), name.size() - prefix.size() - kHostMarkSuffix.size());
      if (uid.empty() || uid.find_first_not_of("0123456789") != std::string::npos) continue;
      bool missing = false;
      auto text = ReadWholeFile(it->path(), &missing);
      if (!text) {
        if (missing) continue;  // replaced between the listing and the read: read the rest
        return tl::unexpected("cannot read the host mark " + text.error());
      }
      const auto doc = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
      if (!doc.is_object() || !doc.contains("unix_ms") || !doc["unix_ms"].is_number_integer() ||
          doc["unix_ms"].get<int64_t>() < 0 || !doc.contains("writer") ||
          !doc["writer"].is_string()) {
        return tl::unexpected("the host mark " + it->path().string() +
                              " is not {\"unix_ms\":N,\"writer\":\"...\"}: a daemon of this host "
                              "wrote the newest millisecond it reserved for machine " +
                              std::to_string(machine) +
                              " there. Delete it only if no daemon of this host served that "
                              "number since boot");
      }
      HostMark mark{doc["unix_ms"].get<int64_t>(), doc["writer"].get<std::string>()};
      if (!highest || mark.unix_ms > highest->unix_ms) highest = std::move(mark);
    }
    return highest;
  } catch (const std::exception& e) {
    return tl::unexpected(std::string("cannot read the host marks: ") + e.what());
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
