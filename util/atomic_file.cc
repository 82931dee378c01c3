#include "util/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace snowflake::util {
namespace {

std::string Failure(std::string_view what, const std::filesystem::path& path, int err) {
  return std::string(what) + " " + path.string() + ": " + std::strerror(err);
}

}  // namespace

tl::expected<void, std::string> WriteFileAtomically(const std::filesystem::path& path,
                                                    std::string_view contents, mode_t mode,
                                                    FileSystem& fs) noexcept {
  try {
    std::filesystem::path tmp = path;
    tmp += ".tmp." + std::to_string(getpid());
    const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0) return tl::unexpected(Failure("create", tmp, errno));
    auto fail = [&](std::string_view what) {
      const int err = errno;
      close(fd);
      unlink(tmp.c_str());
      errno = err;
      return tl::unexpected(Failure(what, tmp, err));
    };
    size_t done = 0;
    while (done < contents.size()) {
      const ssize_t n = write(fd, contents.data() + done, contents.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return fail("write");
      done += static_cast<size_t>(n);
    }
    if (fchmod(fd, mode) != 0) return fail("chmod");
    if (fs.Fsync(fd) != 0) return fail("fsync");
    if (close(fd) != 0) {
      const int err = errno;
      unlink(tmp.c_str());
      return tl::unexpected(Failure("close", tmp, err));
    }
    if (rename(tmp.c_str(), path.c_str()) != 0) {
      const int err = errno;
      unlink(tmp.c_str());
      return tl::unexpected(Failure("rename to", path, err));
    }
    // The rename is durable only once the directory entry is.
    const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : ".";
    const int dir_fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd < 0) return tl::unexpected(Failure("open directory", dir, errno));
    const int rc = fs.Fsync(dir_fd);
    const int err = errno;
    close(dir_fd);
    if (rc != 0) {
      errno = err;
      return tl::unexpected(Failure("fsync directory", dir, err));
    }
    return {};
  } catch (const std::exception& e) {
    return tl::unexpected("write " + path.string() + ": " + e.what());
  }
}

tl::expected<std::string, std::string> ReadWholeFile(const std::filesystem::path& path,
                                                     bool* missing) noexcept {
  if (missing != nullptr) *missing = false;
  try {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      if (missing != nullptr) *missing = err == ENOENT;
      return tl::unexpected(Failure("open", path, err));
    }
    std::string out;
    char buf[4096];
    for (;;) {
      const ssize_t n = read(fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        const int err = errno;
        close(fd);
        return tl::unexpected(Failure("read", path, err));
      }
      if (n == 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    close(fd);
    return out;
  } catch (const std::exception& e) {
    return tl::unexpected("read " + path.string() + ": " + e.what());
  }
}

}  // namespace snowflake::util
