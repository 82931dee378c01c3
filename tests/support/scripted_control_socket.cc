#include "scripted_control_socket.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace snowflake::testing {

ScriptedControlSocket::ScriptedControlSocket(const std::filesystem::path& dir,
                                             std::optional<std::string> reply)
    : reply_(std::move(reply)) {
  fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const std::string path = (dir / "control.sock").string();
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  // In place of a socket already there (a test producer's, which hands out its region), as
  // a daemon's start replaces a stale one.
  unlink(path.c_str());
  if (bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      listen(fd_, 4) != 0 || pipe2(stop_, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "cannot listen on " << path << ": " << std::strerror(errno);
  }
  thread_ = std::thread([this] {
    const int conn = accept(fd_, nullptr, nullptr);
    if (conn < 0) return;
    char buffer[4096];
    while (request_.find('\n') == std::string::npos) {
      const ssize_t n = read(conn, buffer, sizeof(buffer));
      if (n <= 0) break;
      request_.append(buffer, static_cast<size_t>(n));
    }
    if (reply_) {
      const std::string line = *reply_ + "\n";
      (void)!write(conn, line.data(), line.size());
    } else {
      pollfd stop{.fd = stop_[0], .events = POLLIN, .revents = 0};
      while (poll(&stop, 1, -1) < 0 && errno == EINTR) {
      }
    }
    close(conn);
  });
}

ScriptedControlSocket::~ScriptedControlSocket() {
  Join();
  close(fd_);
  for (const int fd : stop_) {
    if (fd >= 0) close(fd);
  }
}

const std::string& ScriptedControlSocket::request() {
  Join();
  return request_;
}

void ScriptedControlSocket::Join() {
  if (!thread_.joinable()) return;
  shutdown(fd_, SHUT_RDWR);  // unblocks accept() if nobody connected
  if (stop_[1] >= 0) (void)!write(stop_[1], "x", 1);
  thread_.join();
}

}  // namespace snowflake::testing
