// UniqueFd: owns one file descriptor and closes it on every path, the way a
// std::unique_ptr owns memory. Move-only; -1 means "none".
//
// Not thread-safe: one owner uses it.

#ifndef SNOWFLAKE_BASE_UNIQUE_FD_H_
#define SNOWFLAKE_BASE_UNIQUE_FD_H_

#include <unistd.h>

#include <utility>

namespace snowflake::daemon {

class UniqueFd {
 public:
  UniqueFd() noexcept = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  ~UniqueFd() { Reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      Reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const noexcept { return fd_; }
  bool valid() const noexcept { return fd_ >= 0; }
  // Closes the descriptor held, if any (a close error is not reported: the descriptor is
  // gone either way, and a read-only or already-fsynced file has nothing left to lose).
  void Reset() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_BASE_UNIQUE_FD_H_
