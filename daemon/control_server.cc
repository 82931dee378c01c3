#include "control_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "snowflake/account_names.h"

namespace snowflake {
namespace {

using json = nlohmann::json;

std::string ErrorReply(std::string_view message) {
  return json{{"ok", false}, {"error", message}}.dump();
}

json StatusObject(const DaemonStatus& s) {
  json out = {
      {"state", s.state},
      {"reason_code", s.reason_code},
      {"reason", s.reason},
      {"reason_detail", s.reason_detail},
      {"pid", s.pid},
      {"version", s.version},
      {"instance", s.instance},
      {"runtime_dir", s.runtime_dir},
      {"state_dir", s.state_dir},
      {"register_backend", s.register_backend},
      {"register_location", s.register_location},
      {"holder_id", s.holder_id},
      {"machine", s.machine},
      {"epoch_unix_ms", s.epoch_unix_ms},
      {"ring_capacity", s.ring_capacity},
      {"ring_fill", s.ring_fill},
      {"fill_target", s.fill_target},
      {"published_total", s.published_total},
      {"drained_total", s.drained_total},
      {"incarnation", s.incarnation},
      {"segment_reopened", s.segment_reopened},
      // IDs are decimal strings in JSON: JavaScript loses precision above 2^53.
      {"last_issued_id", s.last_issued_id ? json(std::to_string(*s.last_issued_id)) : json()},
      {"last_issued_unix_ms", s.last_issued_unix_ms},
      {"reserved_through_unix_ms", s.reserved_through_unix_ms},
      {"clock_pauses", s.clock_pauses},
      {"clock_behind_ms", s.clock_behind_ms},
      {"started_unix_ms", s.started_unix_ms},
      {"state_since_unix_ms", s.state_since_unix_ms},
      {"services", s.services},
  };
  return out;
}

struct Connection {
  int fd = -1;
  uid_t uid = static_cast<uid_t>(-1);
  std::string buffer;
};

bool SendAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = send(fd, text.data() + done, text.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      // A client that does not read its reply: wait briefly, then give up on it.
      pollfd p{fd, POLLOUT, 0};
      if (poll(&p, 1, 100) <= 0) return false;
      continue;
    }
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

std::string StatusToJson(const DaemonStatus& status, bool ok) {
  json out = StatusObject(status);
  out["ok"] = ok;
  return out.dump();
}

std::string HandleControlRequest(std::string_view line, uid_t peer_uid,
                                 const ControlServerOptions& options, StatusBoard& board) {
  try {
    json request;
    try {
      request = json::parse(line);
    } catch (const json::exception&) {
      return ErrorReply(
          "malformed request: expected one JSON object per line, like "
          "{\"command\":\"status\"}");
    }
    if (!request.is_object() || !request.contains("command") || !request["command"].is_string()) {
      return ErrorReply("malformed request: expected an object with a string \"command\"");
    }
    const std::string command = request["command"].get<std::string>();
    if (command == "status") {
      return StatusToJson(board.Snapshot());
    }
    if (command == "resume") {
      std::set<uid_t> allowed = options.resume_uids;
      if (allowed.empty()) allowed = {0, geteuid()};
      if (allowed.count(peer_uid) == 0) {
        std::string who;
        for (const uid_t uid : allowed) {
          if (uid == 0) continue;
          who += (who.empty() ? "" : " or ") + DescribeUser(uid);
        }
        return ErrorReply("permission denied: " + DescribeUser(peer_uid) +
                          " may not resume; resume needs root" +
                          (who.empty() ? std::string() : " or " + who));
      }
      const uint64_t ticket = board.RequestResume();
      const std::optional<bool> resumed = board.WaitForResume(ticket, options.resume_timeout);
      if (!resumed) return ErrorReply("the fill loop did not act on resume in time; retry");
      json out = StatusObject(board.Snapshot());
      out["ok"] = true;
      out["resumed"] = *resumed;
      return out.dump();
    }
    return ErrorReply("unknown command \"" + command + "\": expected \"status\" or \"resume\"");
  } catch (const std::exception& e) {
    return ErrorReply(std::string("internal error: ") + e.what());
  }
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
  if (listen(listen_fd_, 16) != 0) return fail("listen");
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

void ControlServer::Serve() noexcept {
  std::vector<Connection> connections;
  std::vector<pollfd> fds;
  auto close_at = [&](size_t i) {
    close(connections[i].fd);
    connections.erase(connections.begin() + static_cast<std::ptrdiff_t>(i));
  };
  for (;;) {
    try {
      fds.clear();
      fds.push_back({stop_pipe_[0], POLLIN, 0});
      fds.push_back({listen_fd_, POLLIN, 0});
      for (const Connection& c : connections) fds.push_back({c.fd, POLLIN, 0});
      const int ready = poll(fds.data(), fds.size(), -1);
      if (ready < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[0].revents != 0) break;
      // Connections first (indices are stable until we erase, so walk backwards).
      for (size_t i = connections.size(); i-- > 0;) {
        const short revents = fds[i + 2].revents;
        if (revents == 0) continue;
        Connection& c = connections[i];
        char buf[1024];
        const ssize_t n = recv(c.fd, buf, sizeof(buf), 0);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        bool keep = n > 0;
        if (n > 0) c.buffer.append(buf, static_cast<size_t>(n));
        // Each complete line is one request.
        size_t newline;
        while (keep && (newline = c.buffer.find('\n')) != std::string::npos) {
          const std::string line = c.buffer.substr(0, newline);
          c.buffer.erase(0, newline + 1);
          if (line.size() > kMaxControlRequestBytes) {
            SendAll(c.fd, ErrorReply("request too large (max 4096 bytes)") + "\n");
            keep = false;
            break;
          }
          keep = SendAll(c.fd, HandleControlRequest(line, c.uid, options_, board_) + "\n");
        }
        if (keep && c.buffer.size() > kMaxControlRequestBytes) {
          SendAll(c.fd, ErrorReply("request too large (max 4096 bytes)") + "\n");
          keep = false;
        }
        if (n == 0 && !c.buffer.empty() && c.buffer.size() <= kMaxControlRequestBytes) {
          // The peer closed after a last request without a newline: answer it anyway.
          SendAll(c.fd, HandleControlRequest(c.buffer, c.uid, options_, board_) + "\n");
        }
        if (!keep) close_at(i);
      }
      if (fds[1].revents & POLLIN) {
        const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd >= 0) {
          ucred cred{};
          socklen_t len = sizeof(cred);
          if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
            close(fd);
          } else if (connections.size() >= options_.max_connections) {
            SendAll(fd, ErrorReply("too many connections; retry") + "\n");
            close(fd);
          } else {
            connections.push_back(Connection{fd, cred.uid, {}});
          }
        }
      }
    } catch (const std::exception&) {
      // Out of memory handling one client: drop every connection rather than crash.
      for (size_t i = connections.size(); i-- > 0;) close_at(i);
    }
  }
  for (size_t i = connections.size(); i-- > 0;) close_at(i);
}

}  // namespace snowflake
