// The host-wide lock of a machine number: one flock'd file per number in ONE directory
// for the whole host, so two live daemons on one host can never hold the same number,
// whatever their configs say (separate state directories, register files, instance
// names, or a file and a static register).
//
//   <dir>/machine-N.lock   flock'd (exclusive) by the daemon holding N for its whole
//                          life, with its pid inside. The kernel drops the lock when the
//                          process dies, however it dies.
//
// <dir> is /run/lock/snowflaked (kDefaultHostLockDir): /run/lock is the host's directory
// for lock files shared between programs (mode 1777, a tmpfs emptied at boot, which is
// right: a lock only matters while its holder lives). A missing <dir> is created with
// mode 1777, so daemons of different users share it; systemd/tmpfiles.d creates it at
// boot and the unit makes it writable (ReadWritePaths=). Lock files are never unlinked:
// unlinking a lock file while a rival has it open would let a third process lock a new
// file of the same name and hold the number twice.
//
//   <dir>/machine-N.U.high-water   the host mark: {"unix_ms":W,"writer":"S"}, the newest
//                          millisecond a daemon of user U on this host reserved for N (its
//                          state directory S), written with every reservation and lowered
//                          to the last issued one at a clean stop. A daemon that takes N
//                          next starts above every user's, whatever register and state
//                          directory it has: two daemons that serve N one after the other
//                          (two static daemons with separate state directories, an etcd
//                          daemon and then a static one) never repeat each other's
//                          milliseconds after a clock step back. One file per user, so no
//                          daemon needs to replace another user's file in the sticky
//                          directory. Like the locks, the marks last until the next boot.
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

#include "base/file_lock.h"

namespace snowflake::daemon {

inline constexpr std::string_view kDefaultHostLockDir = "/run/lock/snowflaked";
inline constexpr const char* kHostLockDirEnv = "SNOWFLAKE_HOST_LOCK_DIR";

// $SNOWFLAKE_HOST_LOCK_DIR if set and non-empty, else /run/lock/snowflaked.
std::filesystem::path HostLockDir();

// <dir>/machine-N.lock.
std::filesystem::path MachineLockPath(const std::filesystem::path& dir, uint32_t machine);

// Takes the lock of `machine` in `dir` without waiting; creates `dir` (mode 1777) if
// missing. On success the file holds our pid.
// Errors: held_by_other (a live process holds the number; holder_pid if it wrote one);
// a system error whose message names the directory and what to do (cannot create or
// open it: run `systemd-tmpfiles --create snowflaked.conf`, or check its permissions).
[[nodiscard]] tl::expected<FileLock, LockFailure> AcquireMachineLock(
    const std::filesystem::path& dir, uint32_t machine) noexcept;

// One host mark (see above).
struct HostMark {
  int64_t unix_ms = 0;
  std::string writer;  // the state directory of the daemon that wrote it
  friend bool operator==(const HostMark&, const HostMark&) = default;
};

// Writes this user's host mark of `machine` (crash-safe: a temporary file, fsync, rename).
// The caller holds the number's lock. Errors: a sentence naming the file and errno's text.
[[nodiscard]] tl::expected<void, std::string> WriteHostMark(const std::filesystem::path& dir,
                                                            uint32_t machine,
                                                            const HostMark& mark) noexcept;

// The highest host mark of `machine` any user's daemon wrote since boot; nullopt if none.
// Errors: a mark that cannot be read or parsed (a sentence naming the file: a daemon must
// not start below a mark it cannot read; delete the file only if no daemon of this host
// served the number since boot).
[[nodiscard]] tl::expected<std::optional<HostMark>, std::string> ReadHostMark(
    const std::filesystem::path& dir, uint32_t machine) noexcept;

// True if a live process holds `machine`'s lock in `dir` right now.
bool IsMachineLocked(const std::filesystem::path& dir, uint32_t machine,
                     std::optional<pid_t>* holder_pid) noexcept;

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_REGISTER_MACHINE_LOCK_H_
