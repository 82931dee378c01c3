#include "protocol/control_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "protocol/descriptor_passing.h"
#include "snowflake/account_names.h"

namespace snowflake::protocol {
namespace {

using SteadyClock = std::chrono::steady_clock;

int RemainingMs(SteadyClock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
  return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

// What a wait ended with.
enum class Waited { kReady, kTimedOut, kGaveUp };

// Waits until fd is ready for `events` or the deadline passes; with `give_up`, asks it
// every 10 ms whether to stop waiting.
Waited WaitFor(int fd, short events, SteadyClock::time_point deadline,
               const std::function<bool()>& give_up = {}) {
  constexpr int kSliceMs = 10;
  for (;;) {
    const int left = RemainingMs(deadline);
    const int wait = give_up ? std::min(left, kSliceMs) : left;
    pollfd entry{.fd = fd, .events = events, .revents = 0};
    const int rc = poll(&entry, 1, wait);
    if (rc > 0) return Waited::kReady;
    if (rc < 0 && errno != EINTR) return Waited::kTimedOut;
    if (rc == 0 && left <= wait) return Waited::kTimedOut;  // all the time left has passed
    if (give_up && give_up()) return Waited::kGaveUp;
  }
}

tl::unexpected<ControlError> GaveUp(const std::string& path) {
  return tl::unexpected(ControlError{
      vocab::ErrorCode::kDaemonNotHeartbeating,
      "snowflaked stopped heartbeating while its answer on " + path + " was awaited", false});
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

namespace {

// A connected socket and the path it reaches, for messages.
struct Connected {
  UniqueFd fd;
  std::string path;
};

// Connects without blocking: a daemon whose listen backlog is full (it is stopped, or a
// storm of clients is ahead of us) is retried every millisecond until the deadline.
tl::expected<Connected, ControlError> Connect(const std::filesystem::path& runtime_dir,
                                              SteadyClock::time_point deadline,
                                              std::chrono::milliseconds timeout) {
  const std::string path = (runtime_dir / kControlSocketFileName).string();
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path)) {
    return Error(vocab::ErrorCode::kUsage, "control socket path " + path + " is longer than " +
                                               std::to_string(sizeof(address.sun_path) - 1) +
                                               " bytes; use a shorter runtime directory");
  }
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  UniqueFd socket_fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!socket_fd) {
    return Error(vocab::ErrorCode::kSystemError, std::string("socket: ") + std::strerror(errno));
  }
  while (connect(socket_fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) !=
         0) {
    const int err = errno;
    if (err == EINTR) continue;
    if (err == EAGAIN) {
      if (SteadyClock::now() >= deadline) {
        return Error(vocab::ErrorCode::kTimedOut, "snowflaked did not accept a connection on " +
                                                      path + " within " +
                                                      std::to_string(timeout.count()) +
                                                      " ms (its backlog is full); it may "
                                                      "be hung");
      }
      usleep(1000);
      continue;
    }
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
    if (err == EACCES || err == EPERM) {
      return Error(vocab::ErrorCode::kPermissionDenied, PermissionMessage(path));
    }
    return Error(vocab::ErrorCode::kSystemError,
                 "cannot connect to " + path + ": " + std::strerror(err));
  }
  return Connected{std::move(socket_fd), path};
}

tl::expected<void, ControlError> SendLine(const Connected& socket, const std::string& line,
                                          SteadyClock::time_point deadline,
                                          std::chrono::milliseconds timeout,
                                          const std::function<bool()>& give_up = {}) {
  size_t sent = 0;
  while (sent < line.size()) {
    const Waited waited = WaitFor(socket.fd.get(), POLLOUT, deadline, give_up);
    if (waited == Waited::kGaveUp) return GaveUp(socket.path);
    if (waited == Waited::kTimedOut) {
      return Error(vocab::ErrorCode::kTimedOut,
                   "snowflaked did not accept a request on " + socket.path + " within " +
                       std::to_string(timeout.count()) + " ms; it may be hung");
    }
    const ssize_t n = send(socket.fd.get(), line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      // A daemon that refused the connection at once (too many connections) may have
      // closed it before our request went out: its answer may still be there to read.
      if (errno == EPIPE || errno == ECONNRESET) return {};
      return Error(vocab::ErrorCode::kSystemError,
                   "sending to " + socket.path + ": " + std::strerror(errno));
    }
    sent += static_cast<size_t>(n);
  }
  return {};
}

// Reads one reply line. A descriptor that comes with it goes to *descriptor (when not
// null); any other is closed.
tl::expected<std::string, ControlError> ReadLine(const Connected& socket,
                                                 SteadyClock::time_point deadline,
                                                 std::chrono::milliseconds timeout,
                                                 UniqueFd* descriptor,
                                                 const std::function<bool()>& give_up = {}) {
  std::string reply;
  for (;;) {
    if (const size_t end = reply.find('\n'); end != std::string::npos) {
      reply.resize(end);
      return reply;
    }
    const Waited waited = WaitFor(socket.fd.get(), POLLIN, deadline, give_up);
    if (waited == Waited::kGaveUp) return GaveUp(socket.path);
    if (waited == Waited::kTimedOut) {
      return Error(vocab::ErrorCode::kTimedOut, "snowflaked did not answer on " + socket.path +
                                                    " within " + std::to_string(timeout.count()) +
                                                    " ms; it may be hung");
    }
    char buffer[4096];
    std::vector<UniqueFd> passed;
    const ssize_t n = ReceiveWithDescriptors(socket.fd.get(), buffer, &passed);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      if (errno == ECONNRESET) {
        return Error(vocab::ErrorCode::kDaemonNotRunning,
                     "snowflaked reset the connection on " + socket.path +
                         " before answering: it stopped or died; start it again");
      }
      return Error(vocab::ErrorCode::kSystemError,
                   "reading from " + socket.path + ": " + std::strerror(errno));
    }
    // The first descriptor is the reply's; any other closes as `passed` goes.
    if (descriptor != nullptr && !*descriptor && !passed.empty()) {
      *descriptor = std::move(passed.front());
    }
    if (n == 0) {
      if (reply.empty()) {
        // What a daemon killed between accepting and answering leaves.
        return Error(vocab::ErrorCode::kDaemonNotRunning,
                     "snowflaked closed " + socket.path +
                         " without answering: it stopped or died; start it again");
      }
      return reply;  // a last line without its newline
    }
    reply.append(buffer, static_cast<size_t>(n));
  }
}

}  // namespace

tl::expected<nlohmann::json, ControlError> Exchange(const std::filesystem::path& runtime_dir,
                                                    Command command,
                                                    std::chrono::milliseconds timeout) noexcept {
  try {
    const auto deadline = SteadyClock::now() + timeout;
    auto socket = Connect(runtime_dir, deadline, timeout);
    if (!socket) return tl::unexpected(std::move(socket.error()));
    if (auto sent = SendLine(*socket, RequestLine(command), deadline, timeout); !sent) {
      return tl::unexpected(std::move(sent.error()));
    }
    auto line = ReadLine(*socket, deadline, timeout, nullptr);
    if (!line) return tl::unexpected(std::move(line.error()));
    return ParseReply(*line, socket->path);
  } catch (const std::exception& e) {
    return Error(vocab::ErrorCode::kSystemError, std::string("control request: ") + e.what());
  }
}

tl::expected<Attached, ControlError> Attach(const std::filesystem::path& runtime_dir,
                                            uid_t daemon_uid, std::chrono::milliseconds timeout,
                                            const std::function<bool()>& give_up) noexcept {
  try {
    const auto deadline = SteadyClock::now() + timeout;
    auto socket = Connect(runtime_dir, deadline, timeout);
    if (!socket) return tl::unexpected(std::move(socket.error()));
    // Only the daemon's own socket may hand us the memory we take from.
    ucred peer{};
    socklen_t length = sizeof(peer);
    if (getsockopt(socket->fd.get(), SOL_SOCKET, SO_PEERCRED, &peer, &length) != 0) {
      return Error(vocab::ErrorCode::kSystemError,
                   "cannot read the credentials of " + socket->path + ": " + std::strerror(errno));
    }
    if (peer.uid != daemon_uid) {
      return Error(vocab::ErrorCode::kUntrustedSegment,
                   "the process listening on " + socket->path + " (pid " +
                       std::to_string(peer.pid) + ") runs as " + DescribeUser(peer.uid) +
                       ", not as the daemon's user " + DescribeUser(daemon_uid) +
                       " (the owner of the segment); refusing its consumer region");
    }
    if (auto sent = SendLine(*socket, RequestLine(Command::kAttach), deadline, timeout, give_up);
        !sent) {
      return tl::unexpected(std::move(sent.error()));
    }
    Attached attached;
    auto line = ReadLine(*socket, deadline, timeout, &attached.region, give_up);
    if (!line) return tl::unexpected(std::move(line.error()));
    auto reply = ParseReply(*line, socket->path);
    if (!reply) return tl::unexpected(std::move(reply.error()));
    auto record = ReadAttachReply(*reply, socket->path);
    if (!record) return tl::unexpected(std::move(record.error()));
    attached.record = *record;
    if (!attached.region) {
      return Error(vocab::ErrorCode::kBadReply,
                   "snowflaked answered attach on " + socket->path +
                       " without a descriptor; are snowflaked and this client the same "
                       "version?");
    }
    return attached;
  } catch (const std::exception& e) {
    return Error(vocab::ErrorCode::kSystemError, std::string("attach: ") + e.what());
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

tl::expected<shm::RingConsumer, std::string> AttachConsumer(
    const std::filesystem::path& runtime_dir, std::chrono::milliseconds timeout) noexcept {
  try {
    const auto deadline = SteadyClock::now() + timeout;
    std::chrono::milliseconds backoff{1};
    for (int unpaired_retries = 3;; --unpaired_retries) {
      auto observed = shm::RingConsumer::Observe(runtime_dir);
      if (!observed) return tl::unexpected(std::move(observed.error().message));
      auto attached = Attach(runtime_dir, observed->owner(),
                             std::chrono::milliseconds(std::max(RemainingMs(deadline), 1)));
      if (!attached) {
        // A daemon busy with others (a storm of starting processes) says so: retry.
        const ControlError& error = attached.error();
        const bool busy = error.refused && (error.code == vocab::ErrorCode::kTooManyConnections ||
                                            error.code == vocab::ErrorCode::kDaemonStarting);
        if (busy && RemainingMs(deadline) > backoff.count()) {
          std::this_thread::sleep_for(backoff);
          backoff = std::min(backoff * 2, std::chrono::milliseconds(50));
          ++unpaired_retries;  // not a replaced segment
          continue;
        }
        return tl::unexpected(std::move(attached.error().message));
      }
      const uint64_t replied_segment = attached->record.segment_id;
      auto ring = shm::RingConsumer::Open(runtime_dir, std::move(attached->region));
      if (ring && ring->segment_id() == replied_segment) return std::move(*ring);
      if (ring) {
        ring = tl::unexpected(shm::SegmentFailure{
            shm::SegmentError::kUnpaired,
            "the attach reply names segment " + std::to_string(replied_segment) +
                " but its region belongs to segment " + std::to_string(ring->segment_id())});
      }
      if (ring.error().code != shm::SegmentError::kUnpaired || unpaired_retries == 0 ||
          RemainingMs(deadline) == 0) {
        return tl::unexpected(std::move(ring.error().message));
      }
    }
  } catch (const std::exception& e) {
    return tl::unexpected(std::string("attach: ") + e.what());
  }
}

}  // namespace snowflake::protocol
