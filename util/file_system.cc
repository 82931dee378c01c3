#include "util/file_system.h"

#include <unistd.h>

namespace snowflake::util {

FileSystem::~FileSystem() = default;

int FileSystem::Fsync(int fd) noexcept { return fsync(fd); }

FileSystem& FileSystem::Default() noexcept {
  static FileSystem real;
  return real;
}

}  // namespace snowflake::util
