#include "register/machine_lock.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "register/register_settings.h"
#include "snowflake/unique_fd.h"
#include "util/atomic_file.h"

namespace snowflake::reg {
namespace {

// A directory the daemon makes itself is its own: only its user may write there. Sharing
// the directory with daemons of other users is the administrator's decision
// (systemd/tmpfiles.d: root's, group snowflaked-lock, mode 1770).
constexpr mode_t kCreatedDirMode = 0755;

// Which of the host's two directories a message is about.
enum class HostDirKind { kLocks, kMarksOnDisk };

// How the directory is made right, for every refusal.
std::string HowToFix(const std::filesystem::path& dir) {
  return "`systemd-tmpfiles --create snowflaked.conf` makes it root's, group snowflaked-lock, "
         "mode 1770 (or `install -d -o root -g snowflaked-lock -m 1770 " +
         dir.string() +
         "` by hand; add the user of every daemon of this host to group snowflaked-lock)";
}

bool TrustedOwner(uid_t uid) { return uid == 0 || uid == geteuid(); }

// "uid 65534 (nobody)", or "uid 4101" when the uid has no name here.
std::string UserText(uid_t uid) {
  std::string text = "uid " + std::to_string(uid);
  std::vector<char> buffer(4096);
  struct passwd entry {};
  struct passwd* found = nullptr;
  if (getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) == 0 && found != nullptr) {
    text += std::string(" (") + found->pw_name + ")";
  }
  return text;
}

std::string EnvHint(HostDirKind kind) {
  const char* env = kind == HostDirKind::kLocks ? kHostLockDirEnv : kHostMarkDiskDirEnv;
  return std::getenv(env) != nullptr ? std::string("; or point ") + env + " elsewhere"
                                     : std::string();
}

std::string DirProblem(const std::filesystem::path& dir, const std::string& what,
                       HostDirKind kind) {
  return (kind == HostDirKind::kLocks
              ? "cannot use the host-wide machine-number lock directory " + dir.string() + " (" +
                    what +
                    "): every daemon of this host locks its number and writes its host mark "
                    "there. "
              : "cannot use the host-wide directory of host marks on disk " + dir.string() + " (" +
                    what +
                    "): every daemon of this host keeps there the copy of its host mark that "
                    "outlives a reboot. ") +
         HowToFix(dir) + EnvHint(kind);
}

// How long a directory's marks go back: since boot beside the locks, since it was made on disk.
const char* MarkLifetime(HostDirKind kind) {
  return kind == HostDirKind::kLocks ? "since boot" : "since this directory was made";
}

util::LockFailure DirFailure(const std::string& message) {
  return util::LockFailure{false, std::nullopt, message};
}

tl::expected<void, std::string> EnsureHostDir(const std::filesystem::path& dir,
                                              HostDirKind kind) noexcept {
  try {
    struct stat info {};
    if (lstat(dir.c_str(), &info) != 0) {
      if (errno != ENOENT)
        return tl::unexpected(DirProblem(dir, std::string("stat: ") + std::strerror(errno), kind));
      if (mkdir(dir.c_str(), kCreatedDirMode) != 0) {
        if (errno != EEXIST) {
          return tl::unexpected(
              DirProblem(dir, std::string("mkdir: ") + std::strerror(errno), kind));
        }
      } else {
        // mkdir applies the umask (the unit's UMask=0077 would leave 0700): the mode is
        // exact, so daemons of this user's group may enter.
        (void)chmod(dir.c_str(), kCreatedDirMode);
      }
      if (lstat(dir.c_str(), &info) != 0) {
        return tl::unexpected(DirProblem(dir, std::string("stat: ") + std::strerror(errno), kind));
      }
    }
    if (!S_ISDIR(info.st_mode)) {
      return tl::unexpected(
          DirProblem(dir, "not a directory (a symbolic link is refused too)", kind));
    }
    if (!TrustedOwner(info.st_uid)) {
      return tl::unexpected(DirProblem(
          dir,
          "owned by " + UserText(info.st_uid) + ", neither root nor this daemon's user (" +
              UserText(geteuid()) + "): " +
              (kind == HostDirKind::kLocks
                   ? "its owner could unlink a lock file between two daemons' locks, so two "
                     "daemons would hold one number"
                   : "its owner could remove a host mark, and a daemon started after a "
                     "reboot would repeat IDs") +
              ". Remove it (as root) once no daemon of this host runs",
          kind));
    }
    if ((info.st_mode & S_IWOTH) != 0) {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(info.st_mode & 07777));
      return tl::unexpected(
          DirProblem(dir,
                     std::string("mode ") + mode +
                         ", writable by every user: any user could plant a host mark there that "
                         "takes a number out of service",
                     kind));
    }
    return {};
  } catch (const std::exception& e) {
    return tl::unexpected(DirProblem(dir, e.what(), kind));
  }
}

}  // namespace

tl::expected<void, std::string> EnsureHostLockDir(const std::filesystem::path& dir) noexcept {
  return EnsureHostDir(dir, HostDirKind::kLocks);
}

tl::expected<void, std::string> EnsureHostMarkDiskDir(const std::filesystem::path& dir) noexcept {
  return EnsureHostDir(dir, HostDirKind::kMarksOnDisk);
}

std::filesystem::path HostLockDir() {
  const char* env = std::getenv(kHostLockDirEnv);
  if (env != nullptr && *env != '\0') return std::filesystem::path(env);
  return std::filesystem::path(kDefaultHostLockDir);
}

std::filesystem::path HostMarkDiskDir(const std::filesystem::path& lock_dir) {
  const char* env = std::getenv(kHostMarkDiskDirEnv);
  if (env != nullptr && *env != '\0') return std::filesystem::path(env);
  if (lock_dir == std::filesystem::path(kDefaultHostLockDir)) {
    return std::filesystem::path(kDefaultHostMarkDiskDir);
  }
  std::filesystem::path beside = lock_dir;
  beside += ".disk";
  return beside;
}

HostMarkDirs HostMarkDirsFor(const std::filesystem::path& lock_dir) {
  return HostMarkDirs{lock_dir, HostMarkDiskDir(lock_dir)};
}

std::filesystem::path MachineLockPath(const std::filesystem::path& dir, uint32_t machine) {
  return dir / ("machine-" + std::to_string(machine) + ".lock");
}

tl::expected<util::FileLock, util::LockFailure> AcquireMachineLock(const std::filesystem::path& dir,
                                                                   uint32_t machine) noexcept {
  try {
    if (auto trusted = EnsureHostLockDir(dir); !trusted) {
      return tl::unexpected(DirFailure(trusted.error()));
    }
    auto lock = util::FileLock::Acquire(MachineLockPath(dir, machine), /*wait=*/false,
                                        /*write_pid=*/true, 0644);
    if (!lock && !lock.error().held_by_other) {
      util::LockFailure failure = std::move(lock.error());
      failure.message += " (the host-wide machine-number lock directory " + dir.string() +
                         " must let this user create and open files: " + HowToFix(dir) + ")";
      return tl::unexpected(std::move(failure));
    }
    return lock;
  } catch (const std::exception& e) {
    return tl::unexpected(util::LockFailure{false, std::nullopt, e.what()});
  }
}

namespace {

std::string HostMarkPrefix(uint32_t machine) { return "machine-" + std::to_string(machine) + "."; }
constexpr std::string_view kHostMarkSuffix = ".high-water";

tl::expected<void, std::string> WriteMarkIn(const std::filesystem::path& dir, HostDirKind kind,
                                            uint32_t machine, const HostMark& mark) noexcept {
  try {
    if (auto trusted = EnsureHostDir(dir, kind); !trusted) {
      return tl::unexpected("cannot write the host mark: " + trusted.error());
    }
    const std::filesystem::path path =
        dir / (HostMarkPrefix(machine) + std::to_string(geteuid()) + std::string(kHostMarkSuffix));
    const nlohmann::json doc = {{"unix_ms", mark.unix_ms}, {"writer", mark.writer}};
    auto written = util::WriteFileAtomically(
        path, doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n", 0644);
    if (!written) return tl::unexpected("cannot write the host mark: " + written.error());
    return {};
  } catch (const std::exception& e) {
    return tl::unexpected(std::string("cannot write the host mark: ") + e.what());
  }
}

// Largest mark file read: the daemon writes well under 200 bytes.
constexpr size_t kMaxMarkBytes = 4096;

// One mark file, opened without following a link and judged by what the descriptor is.
// Its text; nullopt with *ignored set if it is not to be trusted, or with nothing set if
// it vanished meanwhile. Errors: a trusted mark that cannot be read.
tl::expected<std::optional<std::string>, std::string> ReadTrustedMark(
    const std::filesystem::path& path, uint64_t named_uid, std::string* ignored) {
  // `remedy`: what the operator does about it.
  const auto ignore = [&](uid_t owner, const std::string& why, const char* remedy) {
    *ignored = "ignoring the host mark " + path.string() + " (owned by " + UserText(owner) +
               "): " + why +
               "; a mark is trusted only from a regular file of root or of this daemon's user (" +
               UserText(geteuid()) + ") named for its owner. " + remedy;
    return std::optional<std::string>();
  };
  constexpr const char* kRemove = "Remove it (as root: the directory is sticky)";
  // O_NONBLOCK: opening a FIFO must not wait for a writer.
  const UniqueFd fd(open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (!fd.valid()) {
    const int err = errno;
    if (err == ENOENT) return std::optional<std::string>();  // replaced since the listing
    struct stat link {};
    if (lstat(path.c_str(), &link) == 0 && (S_ISLNK(link.st_mode) || !TrustedOwner(link.st_uid))) {
      return ignore(
          link.st_uid,
          S_ISLNK(link.st_mode) ? "a symbolic link, never followed" : "another user's file",
          kRemove);
    }
    return tl::unexpected("cannot read the host mark " + path.string() + ": " + std::strerror(err));
  }
  struct stat info {};
  if (fstat(fd.get(), &info) != 0) {
    return tl::unexpected("cannot read the host mark " + path.string() + ": " +
                          std::strerror(errno));
  }
  if (!S_ISREG(info.st_mode)) return ignore(info.st_uid, "not a regular file", kRemove);
  if (!TrustedOwner(info.st_uid)) {
    // Named for its owner: the mark of another user's daemon of this host, which may be
    // real; its IDs do not protect this daemon's.
    return ignore(info.st_uid, "neither root's nor this daemon's user's",
                  static_cast<uint64_t>(info.st_uid) == named_uid
                      ? "If a daemon of that user served this number, run the daemons that "
                        "may serve it in turn as one user"
                      : kRemove);
  }
  if (static_cast<uint64_t>(info.st_uid) != named_uid) {
    return ignore(info.st_uid, "named for uid " + std::to_string(named_uid), kRemove);
  }
  if ((info.st_mode & S_IWOTH) != 0) return ignore(info.st_uid, "writable by every user", kRemove);
  std::string text;
  char buffer[512];
  for (;;) {
    const ssize_t n = read(fd.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return tl::unexpected("cannot read the host mark " + path.string() + ": " +
                            std::strerror(errno));
    }
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
    if (text.size() > kMaxMarkBytes) break;  // not a mark: the parse below says so
  }
  return std::optional<std::string>(std::move(text));
}

tl::expected<HostMarkReading, std::string> ReadMarksIn(const std::filesystem::path& dir,
                                                       HostDirKind kind, uint32_t machine,
                                                       int64_t now_unix_ms,
                                                       int64_t max_forward_ms) noexcept {
  try {
    const std::string prefix = HostMarkPrefix(machine);
    HostMarkReading reading;
    struct stat info {};
    if (lstat(dir.c_str(), &info) != 0 && errno == ENOENT) return reading;
    if (auto trusted = EnsureHostDir(dir, kind); !trusted) {
      return tl::unexpected("cannot read the host marks: " + trusted.error());
    }
    std::error_code ec;
    std::filesystem::directory_iterator it(dir, ec), end;
    if (ec) {
      if (ec == std::errc::no_such_file_or_directory) return reading;
      return tl::unexpected("cannot list " + dir.string() + " for host marks: " + ec.message());
    }
    for (; it != end; it.increment(ec)) {
      if (ec) return tl::unexpected("cannot list " + dir.string() + ": " + ec.message());
      const std::string name = it->path().filename().string();
      // machine-N.U.high-water, U all digits: machine-1.high-water is not machine-12's.
      if (!name.starts_with(prefix) || !name.ends_with(kHostMarkSuffix)) continue;
      const std::string uid =
          name.substr(prefix.size(), name.size() - prefix.size() - kHostMarkSuffix.size());
      if (uid.empty() || uid.size() > 10 ||
          uid.find_first_not_of("0123456789") != std::string::npos) {
        continue;
      }
      std::string ignored;
      auto text = ReadTrustedMark(it->path(), std::stoull(uid), &ignored);
      if (!text) return tl::unexpected(text.error());
      if (!ignored.empty()) reading.ignored.push_back(std::move(ignored));
      if (!*text) continue;
      const auto doc = nlohmann::json::parse(**text, nullptr, /*allow_exceptions=*/false);
      if (!doc.is_object() || !doc.contains("unix_ms") || !doc["unix_ms"].is_number_integer() ||
          doc["unix_ms"].get<int64_t>() < 0 || !doc.contains("writer") ||
          !doc["writer"].is_string()) {
        return tl::unexpected("the host mark " + it->path().string() +
                              " is not {\"unix_ms\":N,\"writer\":\"...\"}: a daemon of this host "
                              "wrote the newest millisecond it reserved for machine " +
                              std::to_string(machine) +
                              " there. Delete it only if no daemon of this host served that "
                              "number " +
                              MarkLifetime(kind));
      }
      HostMark mark{doc["unix_ms"].get<int64_t>(), doc["writer"].get<std::string>()};
      if (FarPast(mark.unix_ms, now_unix_ms, max_forward_ms)) {
        return tl::unexpected(
            "the host mark " + it->path().string() + " says machine " + std::to_string(machine) +
            " was reserved through Unix ms " + std::to_string(mark.unix_ms) + ", " +
            std::to_string(mark.unix_ms - now_unix_ms) +
            " ms past this host's clock, more than clock.max_forward_ms (" +
            std::to_string(max_forward_ms) +
            "): refusing to adopt it (it would keep the number out of service until then). If "
            "the clock is right, the mark is wrong: delete the file. If the clock is wrong, set "
            "it right before starting the daemon");
      }
      if (!reading.highest || mark.unix_ms > reading.highest->unix_ms) {
        reading.highest = std::move(mark);
      }
    }
    return reading;
  } catch (const std::exception& e) {
    return tl::unexpected(std::string("cannot read the host marks: ") + e.what());
  }
}

}  // namespace

tl::expected<void, std::string> WriteHostMark(const std::filesystem::path& dir, uint32_t machine,
                                              const HostMark& mark) noexcept {
  return WriteMarkIn(dir, HostDirKind::kLocks, machine, mark);
}

tl::expected<HostMarkReading, std::string> ReadHostMark(const std::filesystem::path& dir,
                                                        uint32_t machine, int64_t now_unix_ms,
                                                        int64_t max_forward_ms) noexcept {
  return ReadMarksIn(dir, HostDirKind::kLocks, machine, now_unix_ms, max_forward_ms);
}

tl::expected<void, std::string> WriteHostMarks(const HostMarkDirs& dirs, uint32_t machine,
                                               const HostMark& mark) noexcept {
  // Both before the caller relies on the reservation: beside the locks for the daemons of
  // this boot, then on disk for those after a reboot.
  if (!dirs.boot.empty()) {
    if (auto written = WriteMarkIn(dirs.boot, HostDirKind::kLocks, machine, mark); !written) {
      return written;
    }
  }
  if (dirs.disk.empty()) return {};
  return WriteMarkIn(dirs.disk, HostDirKind::kMarksOnDisk, machine, mark);
}

tl::expected<HostMarkReading, std::string> ReadHostMarks(const HostMarkDirs& dirs, uint32_t machine,
                                                         int64_t now_unix_ms,
                                                         int64_t max_forward_ms) noexcept {
  HostMarkReading merged;
  for (const auto& [dir, kind] : {std::pair{&dirs.boot, HostDirKind::kLocks},
                                  std::pair{&dirs.disk, HostDirKind::kMarksOnDisk}}) {
    if (dir->empty()) continue;
    auto reading = ReadMarksIn(*dir, kind, machine, now_unix_ms, max_forward_ms);
    if (!reading) return reading;
    for (std::string& ignored : reading->ignored) merged.ignored.push_back(std::move(ignored));
    if (reading->highest &&
        (!merged.highest || reading->highest->unix_ms > merged.highest->unix_ms)) {
      merged.highest = std::move(reading->highest);
    }
  }
  return merged;
}

bool IsMachineLocked(const std::filesystem::path& dir, uint32_t machine,
                     std::optional<pid_t>* holder_pid) noexcept {
  try {
    return util::FileLock::IsHeld(MachineLockPath(dir, machine), holder_pid);
  } catch (...) {
    return false;
  }
}

}  // namespace snowflake::reg
