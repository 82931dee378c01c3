#include "snowflake/pid_namespace.h"

#include <sys/stat.h>

#include <limits>

namespace snowflake::shm {

uint32_t CurrentPidNamespace() noexcept {
  static const uint32_t kCurrent = [] {
    struct stat link {};
    // stat() follows the magic link to the nsfs inode that names the namespace. The
    // kernel numbers them below 2^32; anything else is not one we can record.
    if (stat("/proc/self/ns/pid", &link) != 0 || link.st_ino == 0 ||
        link.st_ino > std::numeric_limits<uint32_t>::max()) {
      return uint32_t{0};
    }
    return static_cast<uint32_t>(link.st_ino);
  }();
  return kCurrent;
}

}  // namespace snowflake::shm
