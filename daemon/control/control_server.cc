#include "daemon/control/control_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "protocol/descriptor_passing.h"
#include "protocol/vocabulary.h"
#include "snowflake/account_names.h"

namespace snowflake::daemon {
namespace {

std::string ErrorReply(vocab::ErrorCode code, std::string_view message) {
  return protocol::Dump(protocol::ErrorReplyJson(code, message));
}

// One accepted socket and its protocol state. Deadlines are steady-clock times.
struct Connection {
  int fd = -1;
  std::unique_ptr<ControlSession> session;
  // By when the next complete request must arrive (reset by each one answered).
  std::chrono::steady_clock::time_point idle_deadline;
  // By when pending output must make progress (reset by each byte sent).
  std::chrono::steady_clock::time_point write_deadline;
};

using PendingDescriptors = std::deque<ControlSession::PendingDescriptor>;

// Sends what the socket takes now (non-blocking), each pending descriptor with the sendmsg
// that starts at its byte. False if the peer is gone.
bool SendSome(int fd, std::string& output, PendingDescriptors& descriptors) {
  while (!output.empty()) {
    const bool with_descriptor = !descriptors.empty() && descriptors.front().offset == 0;
    // A chunk ends where the next descriptor's byte begins.
    size_t length = output.size();
    for (const auto& pending : descriptors) {
      if (pending.offset > 0) {
        length = std::min(length, pending.offset);
        break;
      }
    }
    const ssize_t n = protocol::SendWithDescriptor(
        fd, std::string_view(output).substr(0, length),
        with_descriptor ? descriptors.front().fd.get() : -1, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n <= 0) return false;
    const auto sent = static_cast<size_t>(n);
    output.erase(0, sent);
    if (with_descriptor) descriptors.pop_front();  // the kernel holds its copy now
    for (auto& pending : descriptors) pending.offset -= std::min(pending.offset, sent);
  }
  return true;
}

using SteadyClock = std::chrono::steady_clock;

// Adds each connection to `fds` (after the stop pipe and the listener) with the events it
// waits for, and returns poll's timeout: until the nearest deadline, -1 for none.
int PollSet(const std::vector<Connection>& connections, std::vector<pollfd>& fds) {
  SteadyClock::time_point wake = SteadyClock::time_point::max();
  for (const Connection& c : connections) {
    short events = 0;
    // Stop reading a peer that does not read its replies (bounded memory).
    if (!c.session->closing() && c.session->output().size() < kMaxControlPendingBytes) {
      events |= POLLIN;
    }
    if (!c.session->output().empty()) {
      events |= POLLOUT;
      wake = std::min(wake, c.write_deadline);
    } else {
      wake = std::min(wake, c.idle_deadline);
    }
    fds.push_back({c.fd, events, 0});
  }
  if (wake == SteadyClock::time_point::max()) return -1;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(wake - SteadyClock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, 60'000));
}

// Reads and answers what `c` has ready (`revents`), sends what the socket takes, and
// applies the deadlines: a reply nobody reads, or a connection that sends nothing.
// False: close it.
bool Service(Connection& c, short revents, const ControlServerOptions& options,
             SteadyClock::time_point now) {
  ControlSession& session = *c.session;
  bool keep = true;
  if (revents & (POLLIN | POLLHUP | POLLERR)) {
    char buf[4096];
    const size_t pending = session.output().size();
    const ssize_t n = recv(c.fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) {
      session.OnReceive(std::string_view(buf, static_cast<size_t>(n)));
    } else if (n == 0) {
      session.OnPeerClosed();
    } else if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
      keep = false;
    }
    if (session.output().size() != pending) {  // a request was answered
      c.idle_deadline = now + options.idle_timeout;
      if (pending == 0) c.write_deadline = now + options.write_timeout;
    }
  }
  if (keep && !session.output().empty()) {
    const size_t before = session.output().size();
    keep = SendSome(c.fd, session.output(), session.descriptors());
    if (session.output().size() != before) c.write_deadline = now + options.write_timeout;
  }
  if (keep && session.closing() && session.output().empty()) keep = false;
  if (keep && !session.output().empty() && now >= c.write_deadline) keep = false;
  if (keep && session.output().empty() && now >= c.idle_deadline) keep = false;
  return keep;
}

// Accepts everything pending, so a flood never fills the listen backlog for long. A peer
// beyond the slots its kind may use (privileged peers have `reserved_connections` more),
// or an unprivileged one whose user holds max_connections_per_user already, gets
// too_many_connections and is closed.
void AcceptPending(int listen_fd, std::vector<Connection>& connections,
                   const ControlServerOptions& options, StatusBoard& board) {
  const size_t reserved = std::min(options.reserved_connections, options.max_connections);
  for (;;) {
    const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) break;
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      close(fd);
      continue;
    }
    const bool privileged = IsPrivilegedPeer(cred.uid, options);
    const size_t limit = privileged ? options.max_connections : options.max_connections - reserved;
    const auto held = static_cast<size_t>(
        std::count_if(connections.begin(), connections.end(),
                      [&](const Connection& c) { return c.session->peer_uid() == cred.uid; }));
    if (connections.size() >= limit || (!privileged && held >= options.max_connections_per_user)) {
      std::string reply =
          ErrorReply(vocab::ErrorCode::kTooManyConnections, "too many connections; retry") + "\n";
      PendingDescriptors none;
      SendSome(fd, reply, none);  // best effort, never waits
      close(fd);
      continue;
    }
    const SteadyClock::time_point accepted = SteadyClock::now();
    connections.push_back(Connection{
        .fd = fd,
        .session = std::make_unique<ControlSession>(cred.uid, options, board),
        .idle_deadline = accepted + options.idle_timeout,
        .write_deadline = accepted + options.write_timeout,
    });
  }
}

}  // namespace

namespace {

ControlAnswer TextAnswer(std::string text) {
  return ControlAnswer{.text = std::move(text), .descriptor = UniqueFd(), .last = false};
}

// attach: the consumer region's descriptor and the reply that goes with it; the
// connection ends after it.
ControlAnswer AttachAnswer(StatusBoard& board) {
  std::optional<StatusBoard::AttachPoint> point = board.AttachPointNow();
  if (!point) {
    return ControlAnswer{
        .text = ErrorReply(vocab::ErrorCode::kDaemonStarting,
                           "snowflaked has no segment to attach to yet (it is starting); retry"),
        .descriptor = UniqueFd(),
        .last = true};
  }
  return ControlAnswer{.text = protocol::Dump(protocol::AttachReplyJson(
                           protocol::AttachRecord{.segment_id = point->segment_id,
                                                  .format_version = shm::kVersion,
                                                  .region_bytes = shm::kConsumerRegionSize})),
                       .descriptor = std::move(point->region),
                       .last = true};
}

// resume: root or the daemon's user (or options.resume_uids) only.
std::string ResumeAnswer(uid_t peer_uid, const ControlServerOptions& options, StatusBoard& board) {
  std::set<uid_t> allowed = options.resume_uids;
  if (allowed.empty()) allowed = {0, geteuid()};
  if (allowed.count(peer_uid) == 0) {
    std::string who;
    for (const uid_t uid : allowed) {
      if (uid == 0) continue;
      who += (who.empty() ? "" : " or ") + DescribeUser(uid);
    }
    return ErrorReply(vocab::ErrorCode::kPermissionDenied,
                      "permission denied: " + DescribeUser(peer_uid) +
                          " may not resume; resume needs root" +
                          (who.empty() ? std::string() : " or " + who));
  }
  const uint64_t ticket = board.RequestResume();
  const std::optional<bool> resumed = board.WaitForResume(ticket, options.resume_timeout);
  if (!resumed) {
    return ErrorReply(vocab::ErrorCode::kTimedOut,
                      "the fill loop did not act on resume in time; retry");
  }
  return protocol::Dump(protocol::ResumeReplyJson(board.Snapshot(), *resumed));
}

}  // namespace

ControlAnswer AnswerControlRequest(std::string_view line, uid_t peer_uid,
                                   const ControlServerOptions& options, StatusBoard& board) {
  try {
    const auto command = protocol::ParseRequest(line);
    if (!command) return TextAnswer(ErrorReply(command.error().code, command.error().message));
    switch (*command) {
      case protocol::Command::kStatus:
        // Defaults are no status: before the loop's first report there is none to give.
        if (!board.HasStatus()) {
          return TextAnswer(ErrorReply(vocab::ErrorCode::kDaemonStarting,
                                       "snowflaked on " + options.socket_path.string() +
                                           " has no status yet: it is starting; retry"));
        }
        return TextAnswer(protocol::Dump(protocol::StatusReplyJson(board.Snapshot())));
      case protocol::Command::kResume:
        return TextAnswer(ResumeAnswer(peer_uid, options, board));
      case protocol::Command::kAttach:
        return AttachAnswer(board);
    }
    return TextAnswer(
        ErrorReply(vocab::ErrorCode::kSystemError, "internal error: a command without an answer"));
  } catch (const std::exception& e) {
    return TextAnswer(
        ErrorReply(vocab::ErrorCode::kSystemError, std::string("internal error: ") + e.what()));
  }
}

std::string HandleControlRequest(std::string_view line, uid_t peer_uid,
                                 const ControlServerOptions& options, StatusBoard& board) {
  return AnswerControlRequest(line, peer_uid, options, board).text;
}

ControlServer::ControlServer(ControlServerOptions options, StatusBoard& board)
    : options_(std::move(options)), board_(board) {}

ControlServer::~ControlServer() { Stop(); }

tl::expected<void, std::string> ControlServer::Start() noexcept {
  const std::string path = options_.socket_path.string();
  auto fail = [&](const std::string& what) {
    const std::string message = what + " " + path + ": " + std::strerror(errno);
    if (listen_fd_ >= 0) close(listen_fd_);
    listen_fd_ = -1;
    return tl::unexpected(message);
  };
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return tl::unexpected("control socket path " + path + " is too long (max " +
                          std::to_string(sizeof(addr.sun_path) - 1) + " bytes)");
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listen_fd_ < 0) return fail("socket");
  unlink(path.c_str());  // stale, from a daemon that died: we hold the instance lock
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return fail("bind");
  if (chmod(path.c_str(), options_.mode) != 0) return fail("chmod");
  if (options_.group && chown(path.c_str(), static_cast<uid_t>(-1), *options_.group) != 0) {
    return fail("chown (the daemon's user must be in the group)");
  }
  if (listen(listen_fd_, kControlListenBacklog) != 0) return fail("listen");
  if (pipe2(stop_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) return fail("pipe");
  try {
    thread_ = std::thread([this] { Serve(); });
  } catch (const std::exception& e) {
    return tl::unexpected(std::string("cannot start the control thread: ") + e.what());
  }
  return {};
}

void ControlServer::Stop() noexcept {
  if (thread_.joinable()) {
    [[maybe_unused]] const ssize_t n = write(stop_pipe_[1], "x", 1);
    thread_.join();
  }
  for (int& fd : stop_pipe_) {
    if (fd >= 0) close(fd);
    fd = -1;
  }
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    listen_fd_ = -1;
    unlink(options_.socket_path.c_str());
  }
}

bool IsPrivilegedPeer(uid_t uid, const ControlServerOptions& options) noexcept {
  return uid == 0 || uid == geteuid() || options.resume_uids.count(uid) != 0;
}

void ControlSession::Reply(std::string text) {
  output_ += text;
  output_ += '\n';
}

void ControlSession::Answer(std::string_view line) {
  ControlAnswer answer = AnswerControlRequest(line, peer_uid_, options_, board_);
  if (answer.descriptor) {
    descriptors_.push_back(
        PendingDescriptor{.offset = output_.size(), .fd = std::move(answer.descriptor)});
  }
  Reply(std::move(answer.text));
  // An attach ends the connection: the client has what it came for, and the slot is free
  // for the next one of a storm of starting processes.
  if (answer.last) closing_ = true;
}

void ControlSession::OnReceive(std::string_view bytes) {
  if (closing_) return;
  // Each complete line is one request; only the unterminated tail is kept.
  while (!bytes.empty()) {
    const size_t newline = bytes.find('\n');
    const std::string_view piece = bytes.substr(0, newline);
    if (buffer_.size() + piece.size() > kMaxControlRequestBytes) {
      Reply(ErrorReply(vocab::ErrorCode::kRequestTooLarge, "request too large (max 4096 bytes)"));
      buffer_.clear();
      closing_ = true;
      return;
    }
    if (newline == std::string_view::npos) {
      buffer_.append(piece);
      return;
    }
    std::string line = std::move(buffer_);
    buffer_.clear();
    line.append(piece);
    Answer(line);
    bytes.remove_prefix(newline + 1);
    if (closing_) return;
  }
}

void ControlSession::OnPeerClosed() {
  if (!closing_ && !buffer_.empty()) {
    // The peer closed after a last request without a newline: answer it anyway.
    Answer(buffer_);
  }
  buffer_.clear();
  closing_ = true;
}

void ControlServer::Serve() noexcept {
  std::vector<Connection> connections;
  std::vector<pollfd> fds;
  const auto close_at = [&](size_t i) {
    close(connections[i].fd);
    connections.erase(connections.begin() + static_cast<std::ptrdiff_t>(i));
  };
  for (;;) {
    try {
      fds.clear();
      fds.push_back({stop_pipe_[0], POLLIN, 0});
      fds.push_back({listen_fd_, POLLIN, 0});
      const int timeout_ms = PollSet(connections, fds);
      const int ready = poll(fds.data(), fds.size(), timeout_ms);
      if (ready < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[0].revents != 0) break;
      const SteadyClock::time_point now = SteadyClock::now();
      // Connections first (indices are stable until we erase, so walk backwards).
      for (size_t i = connections.size(); i-- > 0;) {
        if (!Service(connections[i], fds[i + 2].revents, options_, now)) close_at(i);
      }
      if (fds[1].revents & POLLIN) AcceptPending(listen_fd_, connections, options_, board_);
    } catch (const std::exception&) {
      // Out of memory handling one client: drop every connection rather than crash.
      for (size_t i = connections.size(); i-- > 0;) close_at(i);
    }
  }
  for (size_t i = connections.size(); i-- > 0;) close_at(i);
}

}  // namespace snowflake::daemon
