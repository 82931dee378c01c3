// The host-wide lock of a machine number: one flock'd file per number in ONE directory
// for the whole host, so two live daemons on one host can never hold the same number,
// whatever their configs say (separate state directories, register files, instance
// names, or a file and a static register).
//
//   <dir>/machine-N.lock   flock'd (exclusive) by the daemon holding N for its whole
//                          life, with its pid inside. The kernel drops the lock when the
//                          process dies, however it dies.
//
// <dir> is /run/lock/snowflaked (kDefaultHostLockDir), a tmpfs emptied at boot, which is
// right: a lock only matters while its holder lives. Lock files are never unlinked:
// unlinking a lock file while a rival has it open would let a third process lock a new
// file of the same name and hold the number twice.
//
// Who may write in <dir> is decided by the directory, never by trusting file names: it
// must be owned by root or by the daemon's own user and must not be writable by every
// user (EnsureHostLockDir; a user who may write there could plant a mark or unlink a lock
// between two daemons' flocks). systemd/tmpfiles.d makes it at boot: root's, group
// snowflaked-lock (the daemons' group: other users' daemons join it), mode 1770, sticky so
// no daemon can remove another's files. A missing <dir> is created by the daemon as its
// own, mode 0755 (only its user can use it then); the unit makes it writable
// (ReadWritePaths=).
//
//   <dir>/machine-N.U.high-water   the host mark: {"unix_ms":W,"writer":"S"}, the newest
//                          millisecond a daemon of user U on this host reserved for N (S:
//                          the random identity kept in its state directory), written with every
//                          reservation and lowered to the last issued one at a clean stop. A daemon
//                          that takes N next starts above the marks it trusts, whatever register
//                          and state directory it has: two daemons that serve N one after the other
//                          (two static daemons with separate state directories, an etcd daemon and
//                          then a static one) never repeat each other's milliseconds after a clock
//                          step back. One file per user, so no daemon needs to replace another
//                          user's file in the sticky directory. A mark is trusted only from a
//                          regular file (never through a link) owned by root or by the reading
//                          daemon's own user, named for its owner (U) and not writable by every
//                          user; anything else is ignored with a warning. So daemons that may serve
//                          one number one after the other on a host must run as one user (or root)
//                          for their marks to count.
//
// The marks on disk: <dir> empties at boot, and a daemon with another state directory that
// takes N after a reboot with the clock behind would know nothing of the first one's
// milliseconds (a static register keeps no mark). So each mark is written twice, in
// WriteHostMarks' order: in <dir>, then, the same file, in a directory that outlives a
// reboot, /var/lib/snowflaked-host (kDefaultHostMarkDiskDir, HostMarkDiskDir()), trusted
// and made as <dir> is (EnsureHostMarkDiskDir; tmpfiles.d makes it root's, group
// snowflaked-lock, mode 1770), both before the reservation is relied on. A start reads both
// (ReadHostMarks) and takes the higher.
//
// Tests point <dir> at a temporary directory with $SNOWFLAKE_HOST_LOCK_DIR
// (kHostLockDirEnv); production never sets it: daemons with different directories are
// not checked against each other.
//
// The functions are thread-safe.

#ifndef SNOWFLAKE_REGISTER_MACHINE_LOCK_H_
#define SNOWFLAKE_REGISTER_MACHINE_LOCK_H_

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <vector>

#include "util/file_lock.h"

namespace snowflake::reg {

inline constexpr std::string_view kDefaultHostLockDir = "/run/lock/snowflaked";
inline constexpr const char* kHostLockDirEnv = "SNOWFLAKE_HOST_LOCK_DIR";

inline constexpr std::string_view kDefaultHostMarkDiskDir = "/var/lib/snowflaked-host";
inline constexpr const char* kHostMarkDiskDirEnv = "SNOWFLAKE_HOST_MARK_DIR";

// $SNOWFLAKE_HOST_LOCK_DIR if set and non-empty, else /run/lock/snowflaked.
std::filesystem::path HostLockDir();

// Where the copy of the host marks that outlives a reboot is kept for daemons whose lock
// directory is `lock_dir`: $SNOWFLAKE_HOST_MARK_DIR if set and non-empty; else
// /var/lib/snowflaked-host for the default lock directory, and "<lock_dir>.disk" beside any
// other (tests: the daemons of a test share their copy as they share their locks, and
// never touch the host's).
std::filesystem::path HostMarkDiskDir(const std::filesystem::path& lock_dir);

// The host's two directories of marks.
struct HostMarkDirs {
  std::filesystem::path boot;  // beside the locks (HostLockDir()): emptied at boot
  std::filesystem::path disk;  // HostMarkDiskDir(): outlives a reboot; empty: not kept
};

// {lock_dir, HostMarkDiskDir(lock_dir)}.
HostMarkDirs HostMarkDirsFor(const std::filesystem::path& lock_dir);

// <dir>/machine-N.lock.
std::filesystem::path MachineLockPath(const std::filesystem::path& dir, uint32_t machine);

// Makes sure `dir` may be trusted with the host's locks and marks: a directory (not a
// link) owned by root or by this process's user, not writable by every user. A missing
// `dir` is created, this user's, mode 0755.
// Errors: a sentence naming the directory, what is wrong with it (not a directory,
// world-writable, owned by another user, cannot be created) and how to fix it.
[[nodiscard]] tl::expected<void, std::string> EnsureHostLockDir(
    const std::filesystem::path& dir) noexcept;
// The same checks for the directory of host marks on disk, in its own words.
[[nodiscard]] tl::expected<void, std::string> EnsureHostMarkDiskDir(
    const std::filesystem::path& dir) noexcept;

// Takes the lock of `machine` in `dir` without waiting, after EnsureHostLockDir(dir). On
// success the file holds our pid.
// Errors: held_by_other (a live process holds the number; holder_pid if it wrote one);
// a system error whose message names the directory and what to do (EnsureHostLockDir's
// sentence; cannot open the file: check the directory's group and mode).
[[nodiscard]] tl::expected<util::FileLock, util::LockFailure> AcquireMachineLock(
    const std::filesystem::path& dir, uint32_t machine) noexcept;

// One host mark (see above).
struct HostMark {
  int64_t unix_ms = 0;
  std::string writer;  // the identity of the writing daemon's state directory
  friend bool operator==(const HostMark&, const HostMark&) = default;
};

// Writes this user's host mark of `machine` (crash-safe: a temporary file, fsync, rename).
// The caller holds the number's lock. Errors: a sentence naming the file and errno's text.
[[nodiscard]] tl::expected<void, std::string> WriteHostMark(const std::filesystem::path& dir,
                                                            uint32_t machine,
                                                            const HostMark& mark) noexcept;
// WriteHostMark in dirs.boot, then in dirs.disk (each one skipped if empty). Errors: the
// first failure's sentence (nothing more is written after it).
[[nodiscard]] tl::expected<void, std::string> WriteHostMarks(const HostMarkDirs& dirs,
                                                             uint32_t machine,
                                                             const HostMark& mark) noexcept;

// What ReadHostMark found.
struct HostMarkReading {
  // The highest trusted mark; nullopt if none.
  std::optional<HostMark> highest;
  // One warning for each file of the number's marks that was not trusted (another owner,
  // a link, not a regular file, writable by all), naming the file, its owner and why.
  std::vector<std::string> ignored;
};

// The highest trusted host mark of `machine` written since boot (see above for which
// files are trusted). `now_unix_ms` is the reference (the clock, or the later of the clock
// and the register's mark: FarPast) and `max_forward_ms` how far past it a mark may lie
// (clock.max_forward_ms). A missing `dir`: no mark.
// Errors (a sentence naming the file or directory): `dir` is not to be trusted
// (EnsureHostLockDir's checks); a trusted mark that cannot be read or parsed (a daemon
// must not start below a mark it cannot read; delete the file only if no daemon of this
// host served the number since boot); a trusted mark more than `max_forward_ms` past the
// clock (never adopted: either the clock or the mark is wrong, and an operator must say
// which).
[[nodiscard]] tl::expected<HostMarkReading, std::string> ReadHostMark(
    const std::filesystem::path& dir, uint32_t machine, int64_t now_unix_ms,
    int64_t max_forward_ms) noexcept;
// ReadHostMark of dirs.boot and of dirs.disk (each one skipped if empty): the higher mark,
// every warning of both. Errors: either one's.
[[nodiscard]] tl::expected<HostMarkReading, std::string> ReadHostMarks(
    const HostMarkDirs& dirs, uint32_t machine, int64_t now_unix_ms,
    int64_t max_forward_ms) noexcept;

// True if a live process holds `machine`'s lock in `dir` right now.
bool IsMachineLocked(const std::filesystem::path& dir, uint32_t machine,
                     std::optional<pid_t>* holder_pid) noexcept;

}  // namespace snowflake::reg

#endif  // SNOWFLAKE_REGISTER_MACHINE_LOCK_H_
