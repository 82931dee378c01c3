// The filesystem seam of the daemon's durable writes (LevelDB's Env, reduced to what the
// daemon needs): the state file's atomic writer calls fsync through it, so tests can make
// fsync slow or fail without a slow or failing disk (tests/daemon/reservation_service_test.cc).
//
// Implementations must be safe for concurrent use by multiple threads.

#ifndef SNOWFLAKE_UTIL_FILE_SYSTEM_H_
#define SNOWFLAKE_UTIL_FILE_SYSTEM_H_

namespace snowflake::util {

class FileSystem {
 public:
  virtual ~FileSystem();

  // fsync(2) of `fd`: 0 on success, else -1 with errno set (EIO, ENOSPC, ...).
  [[nodiscard]] virtual int Fsync(int fd) noexcept;

  // The real filesystem. Never null; lives for the whole program.
  static FileSystem& Default() noexcept;
};

}  // namespace snowflake::util

#endif  // SNOWFLAKE_UTIL_FILE_SYSTEM_H_
