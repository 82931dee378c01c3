// An flock(2) on a lock file, held for the object's lifetime (released by the kernel when
// the process dies, however it dies, so a SIGKILLed daemon never leaves a stale lock).
//
// A FileLock is not safe for concurrent use; it is movable, not copyable. The lock belongs
// to the open file description: a second FileLock on the same path conflicts with the
// first even within one process.

#ifndef SNOWFLAKE_UTIL_FILE_LOCK_H_
#define SNOWFLAKE_UTIL_FILE_LOCK_H_

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <tl/expected.hpp>

#include "snowflake/clock.h"

namespace snowflake::util {

struct LockFailure {
  // True: another open file (a live process, or another FileLock here) holds the lock.
  // False: a system error (the message has errno's text).
  bool held_by_other = false;
  // The pid the holder wrote into the file, when it did (held_by_other only).
  std::optional<pid_t> holder_pid;
  std::string message;
};

class FileLock {
 public:
  static constexpr mode_t kDefaultMode = 0644;

  // Opens (creating with `mode`) `path` and takes an exclusive flock. `wait`: block until
  // it is free; otherwise fail at once with held_by_other when someone holds it.
  // On success, when `write_pid` is set, the file's contents become our pid and a newline,
  // so a refused rival can name us. A file we may not write (another user's, in a shared
  // lock directory) is locked through a read-only descriptor and keeps its contents.
  // Errors: held_by_other (only without `wait`); a system error opening or locking.
  // Prefer AcquireWithin(): a blocking wait has no bound (any process that can open the
  // file can hold it forever).
  [[nodiscard]] static tl::expected<FileLock, LockFailure> Acquire(
      const std::filesystem::path& path, bool wait, bool write_pid,
      mode_t mode = kDefaultMode) noexcept;

  // Like Acquire() without `wait`, retried (every millisecond or so of `clock`) until
  // `timeout` has passed on `clock`: a bounded wait. Errors: held_by_other once the bound
  // has passed; a system error.
  [[nodiscard]] static tl::expected<FileLock, LockFailure> AcquireWithin(
      const std::filesystem::path& path, std::chrono::milliseconds timeout, bool write_pid,
      mode_t mode = kDefaultMode, Clock& clock = Clock::Real()) noexcept;

  // True if some open file holds the lock on `path` right now (it may change at once).
  // Nonexistent file: false. Sets *holder_pid to the pid written in it, if any.
  static bool IsHeld(const std::filesystem::path& path, std::optional<pid_t>* holder_pid) noexcept;

  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();

  const std::filesystem::path& path() const noexcept { return path_; }

 private:
  FileLock(int fd, std::filesystem::path path) noexcept : fd_(fd), path_(std::move(path)) {}

  int fd_ = -1;
  std::filesystem::path path_;
};

}  // namespace snowflake::util

#endif  // SNOWFLAKE_UTIL_FILE_LOCK_H_
