#include "protocol/control_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <string>

#include "snowflake/account_names.h"

namespace snowflake::protocol {
namespace {

// Closes the socket on every path.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

using SteadyClock = std::chrono::steady_clock;

int RemainingMs(SteadyClock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
  return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

// Waits until fd is ready for `events` or the deadline passes.
bool WaitFor(int fd, short events, SteadyClock::time_point deadline) {
  for (;;) {
    pollfd entry{.fd = fd, .events = events, .revents = 0};
    const int rc = poll(&entry, 1, RemainingMs(deadline));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) return false;
  }
}

tl::unexpected<ControlError> Error(vocab::ErrorCode code, std::string message) {
  return tl::unexpected(ControlError{code, std::move(message), false});
}

// EACCES on connect: who we are, who may connect, and how to become one of them.
std::string PermissionMessage(const std::string& path) {
  const uid_t me = geteuid();
  struct stat info {};
  if (stat(path.c_str(), &info) != 0) {
    return "permission denied connecting to " + path + " as " + DescribeUser(me) +
           ": a directory on the way is closed to this user; join the group of " +
           std::filesystem::path(path).parent_path().string() + " or run as the daemon's user";
  }
  const std::string group = GroupName(info.st_gid);
  return "permission denied connecting to " + path + " (owner " + DescribeUser(info.st_uid) +
         ", group " + DescribeGroupName(info.st_gid) + "): " + DescribeUser(me) +
         " is not in group " + group + "; " +
         GroupAccessAdvice(info.st_gid, "run `sudo usermod -aG " + group + " " + UserName(me) +
                                            "` and log in again (or `newgrp " + group +
                                            "`), or run as " + UserName(info.st_uid));
}

}  // namespace

tl::expected<nlohmann::json, ControlError> Exchange(const std::filesystem::path& runtime_dir,
                                                    Command command,
                                                    std::chrono::milliseconds timeout) noexcept {
  try {
    const std::string path = (runtime_dir / kControlSocketFileName).string();
    const auto deadline = SteadyClock::now() + timeout;
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    if (path.size() >= sizeof(address.sun_path)) {
      return Error(vocab::ErrorCode::kUsage, "control socket path " + path + " is longer than " +
                                                 std::to_string(sizeof(address.sun_path) - 1) +
                                                 " bytes; use a shorter runtime directory");
    }
    std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
    Fd socket_fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (socket_fd.get() < 0)
      return Error(vocab::ErrorCode::kSystemError, std::string("socket: ") + std::strerror(errno));
    if (connect(socket_fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) !=
        0) {
      const int err = errno;
      if (err == ENOENT) {
        return Error(vocab::ErrorCode::kDaemonNotRunning,
                     "no control socket at " + path +
                         ": snowflaked is not running with this runtime directory (start it, "
                         "or name the directory it uses with --runtime-dir)");
      }
      if (err == ECONNREFUSED) {
        return Error(vocab::ErrorCode::kDaemonNotRunning,
                     "nothing listens on " + path +
                         " (left by a daemon that stopped or died): start snowflaked again");
      }
      if (err == EACCES || err == EPERM)
        return Error(vocab::ErrorCode::kPermissionDenied, PermissionMessage(path));
      return Error(vocab::ErrorCode::kSystemError,
                   "cannot connect to " + path + ": " + std::strerror(err));
    }

    const std::string line = RequestLine(command);
    size_t sent = 0;
    while (sent < line.size()) {
      if (!WaitFor(socket_fd.get(), POLLOUT, deadline)) {
        return Error(vocab::ErrorCode::kTimedOut, "snowflaked did not accept a request on " + path +
                                                      " within " + std::to_string(timeout.count()) +
                                                      " ms; it may be hung");
      }
      const ssize_t n = send(socket_fd.get(), line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR || errno == EAGAIN) continue;
        return Error(vocab::ErrorCode::kSystemError,
                     "sending to " + path + ": " + std::strerror(errno));
      }
      sent += static_cast<size_t>(n);
    }

    std::string reply;
    for (;;) {
      if (const size_t end = reply.find('\n'); end != std::string::npos) {
        reply.resize(end);
        break;
      }
      if (!WaitFor(socket_fd.get(), POLLIN, deadline)) {
        return Error(vocab::ErrorCode::kTimedOut, "snowflaked did not answer on " + path +
                                                      " within " + std::to_string(timeout.count()) +
                                                      " ms; it may be hung");
      }
      char buffer[4096];
      const ssize_t n = recv(socket_fd.get(), buffer, sizeof(buffer), 0);
      if (n < 0) {
        if (errno == EINTR || errno == EAGAIN) continue;
        return Error(vocab::ErrorCode::kSystemError,
                     "reading from " + path + ": " + std::strerror(errno));
      }
      if (n == 0) {
        if (reply.empty()) {
          return Error(vocab::ErrorCode::kBadReply,
                       "snowflaked closed " + path + " without answering");
        }
        break;  // a last line without its newline
      }
      reply.append(buffer, static_cast<size_t>(n));
    }
    return ParseReply(reply, path);
  } catch (const std::exception& e) {
    return Error(vocab::ErrorCode::kSystemError, std::string("control request: ") + e.what());
  }
}

namespace {

// Sends `command` and reads the accepted reply with `read` (ReadStatusReply or
// ReadResumeReply), which names the socket in its errors.
template <typename Read>
auto Ask(const std::filesystem::path& runtime_dir, Command command,
         std::chrono::milliseconds timeout, Read read) noexcept
    -> decltype(read(nlohmann::json(), std::string_view())) {
  try {
    auto reply = Exchange(runtime_dir, command, timeout);
    if (!reply) return tl::unexpected(std::move(reply.error()));
    return read(*reply, (runtime_dir / kControlSocketFileName).string());
  } catch (const std::exception& e) {
    return Error(vocab::ErrorCode::kSystemError,
                 std::string(CommandName(command)) + " request: " + e.what());
  }
}

}  // namespace

tl::expected<StatusRecord, ControlError> QueryStatus(const std::filesystem::path& runtime_dir,
                                                     std::chrono::milliseconds timeout) noexcept {
  return Ask(runtime_dir, Command::kStatus, timeout, ReadStatusReply);
}

tl::expected<ResumeResult, ControlError> Resume(const std::filesystem::path& runtime_dir,
                                                std::chrono::milliseconds timeout) noexcept {
  return Ask(runtime_dir, Command::kResume, timeout, ReadResumeReply);
}

}  // namespace snowflake::protocol
