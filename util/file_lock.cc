#include "util/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace snowflake::util {
namespace {

std::optional<pid_t> ReadPid(int fd) {
  char buf[32] = {};
  const ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return std::nullopt;
  char* end = nullptr;
  const long pid = std::strtol(buf, &end, 10);
  if (end == buf || pid <= 0) return std::nullopt;
  return static_cast<pid_t>(pid);
}

}  // namespace

tl::expected<FileLock, LockFailure> FileLock::Acquire(const std::filesystem::path& path, bool wait,
                                                      bool write_pid, mode_t mode) noexcept {
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, mode);
  bool writable = true;
  if (fd < 0 && errno == EACCES) {
    // Another user's lock file (a shared lock directory): flock needs no write access,
    // so lock it read-only; only the pid cannot be recorded.
    fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    writable = false;
  }
  if (fd < 0) {
    const int err = errno;
    return tl::unexpected(
        LockFailure{false, std::nullopt, "open " + path.string() + ": " + std::strerror(err)});
  }
  int rc;
  do {
    rc = flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const int err = errno;
    if (err == EWOULDBLOCK) {
      LockFailure failure{true, ReadPid(fd), path.string() + " is locked"};
      if (failure.holder_pid) failure.message += " by pid " + std::to_string(*failure.holder_pid);
      close(fd);
      return tl::unexpected(std::move(failure));
    }
    close(fd);
    return tl::unexpected(
        LockFailure{false, std::nullopt, "flock " + path.string() + ": " + std::strerror(err)});
  }
  if (write_pid && writable) {
    const std::string text = std::to_string(getpid()) + "\n";
    // Best effort: the lock is what protects; the pid only improves a rival's message.
    if (ftruncate(fd, 0) == 0) {
      [[maybe_unused]] const ssize_t n = pwrite(fd, text.data(), text.size(), 0);
    }
  }
  try {
    return FileLock(fd, path);
  } catch (...) {
    close(fd);
    return tl::unexpected(LockFailure{false, std::nullopt, "out of memory"});
  }
}

tl::expected<FileLock, LockFailure> FileLock::AcquireWithin(const std::filesystem::path& path,
                                                            std::chrono::milliseconds timeout,
                                                            bool write_pid, mode_t mode,
                                                            Clock& clock) noexcept {
  const auto deadline = clock.SteadyNow() + timeout;
  for (;;) {
    auto lock = Acquire(path, /*wait=*/false, write_pid, mode);
    if (lock || !lock.error().held_by_other || clock.SteadyNow() >= deadline) {
      if (!lock && lock.error().held_by_other) {
        lock.error().message += " (still after " + std::to_string(timeout.count()) + " ms)";
      }
      return lock;
    }
    clock.SleepFor(std::chrono::milliseconds(1));
  }
}

bool FileLock::IsHeld(const std::filesystem::path& path,
                      std::optional<pid_t>* holder_pid) noexcept {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  // A shared probe conflicts with the holder's exclusive lock, and never blocks a holder
  // for longer than this call.
  const bool held = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  if (holder_pid != nullptr) *holder_pid = held ? ReadPid(fd) : std::nullopt;
  close(fd);  // drops the probe's lock if it got one
  return held;
}

FileLock::FileLock(FileLock&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
  }
  return *this;
}

FileLock::~FileLock() {
  if (fd_ >= 0) close(fd_);
}

}  // namespace snowflake::util
