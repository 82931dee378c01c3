#include "fault_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <optional>
#include <string_view>
#include <utility>

namespace snowflake::testing {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr size_t kMaxHead = 64 * 1024;
constexpr size_t kMaxBody = 16 * 1024 * 1024;
// A send to a peer that stopped reading gives up after this long instead of blocking the
// connection's thread (and the proxy's destruction) for ever.
constexpr auto kSendTimeout = 5s;

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

// A bounded, printable excerpt of bytes received, for error messages.
std::string Excerpt(std::string_view bytes) {
  std::string out;
  for (char c : bytes.substr(0, 80)) {
    out += std::isprint(static_cast<unsigned char>(c)) ? c : '?';
  }
  return "\"" + out + (bytes.size() > 80 ? "...\"" : "\"");
}

bool IEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The header fields that delimit a message. `head` is the start line and the header
// lines, each ending with CRLF, without the blank line.
struct Framing {
  std::string start_line;
  std::optional<size_t> content_length;
  bool chunked = false;
};

tl::expected<Framing, std::string> ParseHead(std::string_view head) {
  Framing framing;
  size_t line_end = head.find("\r\n");
  framing.start_line = std::string(head.substr(0, line_end));
  size_t pos = line_end + 2;
  while (pos < head.size()) {
    line_end = head.find("\r\n", pos);
    const std::string_view line = head.substr(pos, line_end - pos);
    pos = line_end + 2;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      return tl::unexpected("a header line without a name and ':' " + Excerpt(line));
    }
    const std::string_view name = line.substr(0, colon);
    const std::string_view value = Trim(line.substr(colon + 1));
    if (IEquals(name, "Content-Length")) {
      size_t length = 0;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), length);
      if (ec != std::errc() || end != value.data() + value.size()) {
        return tl::unexpected("a Content-Length that is not a number " + Excerpt(value));
      }
      if (length > kMaxBody) {
        return tl::unexpected("a Content-Length of " + std::to_string(length) +
                              " bytes, more than the proxy's limit of 16 MiB");
      }
      if (framing.content_length && *framing.content_length != length) {
        return tl::unexpected(std::string("two different Content-Length headers"));
      }
      framing.content_length = length;
    } else if (IEquals(name, "Transfer-Encoding")) {
      framing.chunked = true;
    }
  }
  return framing;
}

// A whole request at the start of `buffer`: its length and request line; nullopt while
// more bytes are needed; an error if the bytes cannot be an HTTP/1.1 request we frame.
struct Request {
  size_t length = 0;
  std::string request_line;
};
tl::expected<std::optional<Request>, std::string> ParseRequest(std::string_view buffer) {
  const size_t end = buffer.find("\r\n\r\n");
  if (end == std::string_view::npos) {
    if (buffer.size() > kMaxHead) {
      return tl::unexpected("a request line and headers longer than 64 KiB: " + Excerpt(buffer));
    }
    return std::nullopt;
  }
  if (end + 4 > kMaxHead) {
    return tl::unexpected("a request line and headers longer than 64 KiB: " + Excerpt(buffer));
  }
  auto framing = ParseHead(buffer.substr(0, end + 2));
  if (!framing) return tl::unexpected("a request with " + framing.error());
  const std::string& line = framing->start_line;
  const bool http1 = line.ends_with(" HTTP/1.1") || line.ends_with(" HTTP/1.0");
  if (!http1 || line.find(' ') == line.size() - 9) {
    return tl::unexpected("not an HTTP/1.1 request line: " + Excerpt(line));
  }
  if (framing->chunked) {
    return tl::unexpected("a chunked request body (" + line +
                          "): the proxy frames requests by Content-Length only");
  }
  const size_t total = end + 4 + framing->content_length.value_or(0);
  if (buffer.size() < total) return std::nullopt;
  return Request{total, line};
}

bool SendAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

void Configure(int fd) {
  const timeval send_timeout{std::chrono::duration_cast<std::chrono::seconds>(kSendTimeout).count(),
                             0};
  (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof(send_timeout));
  const int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

sockaddr_in Loopback(int port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return address;
}

// A socket connected to 127.0.0.1:port (on loopback, connect answers at once).
tl::expected<int, std::string> ConnectLoopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return tl::unexpected(Errno("socket"));
  const sockaddr_in address = Loopback(port);
  int rc;
  do {
    rc = connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    std::string error = Errno("cannot connect to the upstream 127.0.0.1:" + std::to_string(port));
    close(fd);
    return tl::unexpected(error);
  }
  Configure(fd);
  return fd;
}

// A listening socket on 127.0.0.1:port (0: an ephemeral port).
tl::expected<int, std::string> Listen(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return tl::unexpected(Errno("socket"));
  const int one = 1;
  (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  const sockaddr_in address = Loopback(port);
  if (bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0 ||
      listen(fd, 64) != 0) {
    std::string error = Errno("cannot listen on 127.0.0.1:" + std::to_string(port));
    close(fd);
    return tl::unexpected(error);
  }
  return fd;
}

// Reads one whole HTTP/1.1 answer from `fd` (skipping 1xx answers) by `deadline`.
tl::expected<FaultProxy::Delivery, std::string> ReadAnswer(int fd, Clock::time_point deadline) {
  std::string buffer;
  bool eof = false;
  // Reads more bytes; an error on a timeout or an oversized answer.
  auto fill = [&]() -> tl::expected<void, std::string> {
    for (;;) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left <= 0ms) return tl::unexpected(std::string("no complete answer in time"));
      pollfd p{fd, POLLIN, 0};
      const int ready = poll(&p, 1, static_cast<int>(left.count()));
      if (ready < 0 && errno == EINTR) continue;
      if (ready < 0) return tl::unexpected(Errno("poll"));
      if (ready == 0) continue;
      char chunk[16384];
      const ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return tl::unexpected(Errno("recv"));
      if (n == 0) {
        eof = true;
        return {};
      }
      buffer.append(chunk, static_cast<size_t>(n));
      if (buffer.size() > kMaxHead + 2 * kMaxBody) {
        return tl::unexpected(std::string("an answer larger than the proxy's limit"));
      }
      return {};
    }
  };
  auto need = [&](const char* what) -> tl::expected<void, std::string> {
    if (eof) return tl::unexpected("the upstream closed the connection " + std::string(what));
    return fill();
  };

  for (;;) {
    const size_t end = buffer.find("\r\n\r\n");
    if (end == std::string::npos) {
      if (buffer.size() > kMaxHead) {
        return tl::unexpected("answer headers longer than 64 KiB: " + Excerpt(buffer));
      }
      if (auto ok = need("before the answer's headers"); !ok) return tl::unexpected(ok.error());
      continue;
    }
    auto framing = ParseHead(std::string_view(buffer).substr(0, end + 2));
    if (!framing) return tl::unexpected("an answer with " + framing.error());
    const std::string& line = framing->start_line;
    int status = 0;
    if (!line.starts_with("HTTP/1.") || line.size() < 12 ||
        std::from_chars(line.data() + 9, line.data() + 12, status).ec != std::errc()) {
      return tl::unexpected("not an HTTP/1.1 status line: " + Excerpt(line));
    }
    size_t pos = end + 4;
    if (status >= 100 && status < 200) {
      buffer.erase(0, pos);
      continue;
    }
    FaultProxy::Delivery delivery;
    delivery.status = status;
    if (framing->chunked) {
      for (;;) {
        const size_t size_end = buffer.find("\r\n", pos);
        if (size_end == std::string::npos) {
          if (auto ok = need("inside a chunked answer"); !ok) return tl::unexpected(ok.error());
          continue;
        }
        std::string_view size_text = std::string_view(buffer).substr(pos, size_end - pos);
        size_text = size_text.substr(0, size_text.find(';'));
        size_t size = 0;
        const auto [p, ec] =
            std::from_chars(size_text.data(), size_text.data() + size_text.size(), size, 16);
        if (ec != std::errc() || size > kMaxBody) {
          return tl::unexpected("a bad chunk size " + Excerpt(size_text));
        }
        if (size == 0) {
          // Trailers, if any, end with an empty line.
          while (buffer.find("\r\n", size_end + 2) == std::string::npos) {
            if (auto ok = need("inside a chunked answer"); !ok) return tl::unexpected(ok.error());
          }
          return delivery;
        }
        while (buffer.size() < size_end + 2 + size + 2) {
          if (auto ok = need("inside a chunked answer"); !ok) return tl::unexpected(ok.error());
        }
        delivery.body.append(buffer, size_end + 2, size);
        pos = size_end + 2 + size + 2;
      }
    }
    if (framing->content_length) {
      while (buffer.size() < pos + *framing->content_length) {
        if (auto ok = need("inside the answer's body"); !ok) return tl::unexpected(ok.error());
      }
      delivery.body = buffer.substr(pos, *framing->content_length);
      return delivery;
    }
    // Neither: the body ends with the connection.
    while (!eof) {
      if (auto ok = fill(); !ok) return tl::unexpected(ok.error());
    }
    delivery.body = buffer.substr(pos);
    return delivery;
  }
}

}  // namespace

tl::expected<std::unique_ptr<FaultProxy>, std::string> FaultProxy::Start(int upstream_port) {
  auto listen_fd = Listen(0);
  if (!listen_fd) return tl::unexpected(listen_fd.error());
  sockaddr_in bound{};
  socklen_t length = sizeof(bound);
  if (getsockname(*listen_fd, reinterpret_cast<sockaddr*>(&bound), &length) != 0) {
    std::string error = Errno("getsockname");
    close(*listen_fd);
    return tl::unexpected(error);
  }
  int wake[2];
  int stop[2];
  if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    std::string error = Errno("pipe2");
    close(*listen_fd);
    return tl::unexpected(error);
  }
  if (pipe2(stop, O_CLOEXEC) != 0) {
    std::string error = Errno("pipe2");
    close(*listen_fd);
    close(wake[0]);
    close(wake[1]);
    return tl::unexpected(error);
  }
  return std::unique_ptr<FaultProxy>(new FaultProxy(
      upstream_port, *listen_fd, ntohs(bound.sin_port), wake[0], wake[1], stop[0], stop[1]));
}

FaultProxy::FaultProxy(int upstream_port, int listen_fd, int port, int wake_read, int wake_write,
                       int stop_read, int stop_write)
    : upstream_port_(upstream_port),
      port_(port),
      wake_read_(wake_read),
      wake_write_(wake_write),
      stop_read_(stop_read),
      stop_write_(stop_write),
      listen_fd_(listen_fd) {
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

FaultProxy::~FaultProxy() {
  // Closing the write end makes stop_read_ readable (EOF) for every thread at once.
  close(stop_write_);
  acceptor_.join();
  std::list<Worker> workers;
  {
    std::lock_guard lock(mutex_);
    workers.swap(workers_);
  }
  for (Worker& w : workers) w.thread.join();
  close(stop_read_);
  close(wake_read_);
  close(wake_write_);
}

std::string FaultProxy::url() const { return "http://127.0.0.1:" + std::to_string(port_); }

void FaultProxy::Wake() {
  const char byte = 1;
  // A full pipe already wakes the acceptor.
  (void)!write(wake_write_, &byte, 1);
}

void FaultProxy::SetError(std::string error) {
  std::lock_guard lock(mutex_);
  last_error_ = std::move(error);
}

tl::expected<void, std::string> FaultProxy::SetMode(Mode mode, std::string hold_filter,
                                                    std::string hold_body_filter) {
  std::unique_lock lock(mutex_);
  const bool was_refusing = mode_ == Mode::kRefuse;
  const bool refuse = mode == Mode::kRefuse;
  mode_ = mode;
  hold_filter_ = std::move(hold_filter);
  hold_body_filter_ = std::move(hold_body_filter);
  if (refuse) {
    // The connections' threads see EOF and end; the clients see their connection closed.
    for (const auto& [id, conn] : conns_) {
      shutdown(conn.client, SHUT_RDWR);
      shutdown(conn.upstream, SHUT_RDWR);
    }
  }
  if (refuse == was_refusing) return {};
  relisten_failed_ = false;
  Wake();
  if (!changed_.wait_for(lock, 5s, [&] { return listening_ != refuse || relisten_failed_; })) {
    return tl::unexpected(std::string("the proxy's acceptor did not confirm the mode within 5 s"));
  }
  if (relisten_failed_) return tl::unexpected(last_error_);
  if (refuse && !changed_.wait_for(lock, 5s, [&] { return conns_.empty(); })) {
    return tl::unexpected(std::to_string(conns_.size()) +
                          " connections were still open 5 s after refusing");
  }
  return {};
}

FaultProxy::Mode FaultProxy::mode() const {
  std::lock_guard lock(mutex_);
  return mode_;
}

bool FaultProxy::WaitForHeld(size_t requests, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, timeout, [&] { return held_.size() >= requests; });
}

bool FaultProxy::WaitForForwarded(uint64_t requests, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, timeout, [&] { return counts_.forwarded >= requests; });
}

std::vector<std::string> FaultProxy::HeldRequestLines() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> lines;
  for (const Held& h : held_) lines.push_back(h.request_line);
  return lines;
}

tl::expected<std::vector<FaultProxy::Delivery>, std::string> FaultProxy::ReleaseHeld(
    int copies, std::chrono::milliseconds timeout) {
  if (copies < 1) {
    return tl::unexpected("ReleaseHeld: copies is " + std::to_string(copies) +
                          ", it must be at least 1");
  }
  std::deque<Held> batch;
  {
    std::lock_guard lock(mutex_);
    batch.swap(held_);
  }
  changed_.notify_all();
  std::vector<Delivery> deliveries;
  for (const Held& held : batch) {
    for (int copy = 0; copy < copies; ++copy) {
      // A fresh connection: the original client has typically timed out and closed its own.
      auto fd = ConnectLoopback(upstream_port_);
      if (!fd) return tl::unexpected("releasing " + held.request_line + ": " + fd.error());
      tl::expected<Delivery, std::string> answer =
          tl::unexpected("releasing " + held.request_line + ": " + Errno("send"));
      if (SendAll(*fd, held.bytes)) {
        answer = ReadAnswer(*fd, Clock::now() + timeout);
        if (!answer)
          answer = tl::unexpected("releasing " + held.request_line + ": " + answer.error());
      }
      close(*fd);
      if (!answer) return tl::unexpected(answer.error());
      answer->request_line = held.request_line;
      deliveries.push_back(std::move(*answer));
      std::lock_guard lock(mutex_);
      ++counts_.released;
    }
  }
  return deliveries;
}

size_t FaultProxy::DiscardHeld() {
  std::lock_guard lock(mutex_);
  const size_t n = held_.size();
  held_.clear();
  changed_.notify_all();
  return n;
}

std::vector<std::string> FaultProxy::ForwardedRequestLines() const {
  std::lock_guard lock(mutex_);
  return forwarded_lines_;
}

FaultProxy::Counts FaultProxy::counts() const {
  std::lock_guard lock(mutex_);
  return counts_;
}

std::string FaultProxy::last_error() const {
  std::lock_guard lock(mutex_);
  return last_error_;
}

void FaultProxy::AcceptLoop() {
  uint64_t next_id = 0;
  for (;;) {
    pollfd fds[3] = {{stop_read_, POLLIN, 0}, {wake_read_, POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    const nfds_t count = listen_fd_ >= 0 ? 3 : 2;
    if (poll(fds, count, -1) < 0) {
      if (errno == EINTR) continue;
      SetError(Errno("the proxy's acceptor: poll"));
      break;
    }
    if (fds[0].revents != 0) break;
    if (fds[1].revents != 0) {
      char drain[64];
      while (read(wake_read_, drain, sizeof(drain)) > 0) {
      }
      const bool refuse = mode() == Mode::kRefuse;
      std::string error;
      if (refuse && listen_fd_ >= 0) {
        close(listen_fd_);
        listen_fd_ = -1;
      } else if (!refuse && listen_fd_ < 0) {
        auto fd = Listen(port_);
        if (fd)
          listen_fd_ = *fd;
        else
          error = fd.error();
      }
      {
        std::lock_guard lock(mutex_);
        listening_ = listen_fd_ >= 0;
        if (!error.empty()) {
          last_error_ = error;
          relisten_failed_ = true;
        }
      }
      changed_.notify_all();
      continue;  // the listening socket may have changed
    }
    if (count == 3 && fds[2].revents != 0) {
      const int client = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) continue;
      Configure(client);
      // Join the connections that ended, outside the lock (they no longer need it).
      std::list<Worker> finished;
      auto done = std::make_shared<bool>(false);
      {
        std::lock_guard lock(mutex_);
        ++counts_.connections;
        for (auto it = workers_.begin(); it != workers_.end();) {
          auto next = std::next(it);
          if (*it->done) finished.splice(finished.end(), workers_, it);
          it = next;
        }
        const uint64_t id = next_id++;
        workers_.push_back(
            Worker{std::thread([this, client, id, done] { Serve(client, id, done); }), done});
      }
      for (Worker& w : finished) w.thread.join();
    }
  }
  if (listen_fd_ >= 0) close(listen_fd_);
  listen_fd_ = -1;
}

void FaultProxy::Serve(int client, uint64_t id, std::shared_ptr<bool> done) {
  auto upstream = ConnectLoopback(upstream_port_);
  bool registered = false;
  {
    std::lock_guard lock(mutex_);
    if (!upstream) {
      last_error_ = upstream.error();
    } else if (mode_ != Mode::kRefuse) {
      // Accepted just before the mode turned to kRefuse: closed at once below.
      conns_[id] = Conn{client, *upstream};
      registered = true;
    }
  }
  // Per connection: once a request was held (or swallowed), every later one is too, as
  // HTTP/1.1 answers in order; once an answer is to be dropped, every later one is.
  bool holding = false;
  bool swallowing = false;
  bool mute = false;
  std::string in;
  char chunk[16384];
  while (registered) {
    pollfd fds[3] = {{client, POLLIN, 0}, {*upstream, POLLIN, 0}, {stop_read_, POLLIN, 0}};
    if (poll(fds, 3, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[2].revents != 0) break;
    if (fds[0].revents != 0) {
      const ssize_t n = recv(client, chunk, sizeof(chunk), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      in.append(chunk, static_cast<size_t>(n));
      bool failed = false;
      for (;;) {
        auto request = ParseRequest(in);
        if (!request) {
          std::lock_guard lock(mutex_);
          last_error_ = "a client of the proxy on 127.0.0.1:" + std::to_string(port_) + " sent " +
                        request.error();
          ++counts_.malformed;
          failed = true;
          break;
        }
        if (!*request) break;
        std::string bytes = in.substr(0, (*request)->length);
        in.erase(0, (*request)->length);
        bool forward = false;
        {
          std::lock_guard lock(mutex_);
          if (swallowing || mode_ == Mode::kBlackhole) {
            swallowing = true;
            ++counts_.blackholed;
          } else if (holding ||
                     (mode_ == Mode::kHold &&
                      (*request)->request_line.find(hold_filter_) != std::string::npos &&
                      bytes.find(hold_body_filter_) != std::string::npos)) {
            holding = true;
            held_.push_back(Held{(*request)->request_line, std::move(bytes)});
            ++counts_.held;
          } else {
            if (mode_ == Mode::kDropAnswers) {
              mute = true;
              ++counts_.answers_dropped;
            }
            forward = true;
          }
        }
        changed_.notify_all();
        if (!forward) continue;
        if (!SendAll(*upstream, bytes)) {
          failed = true;
          break;
        }
        {
          std::lock_guard lock(mutex_);
          ++counts_.forwarded;
          forwarded_lines_.push_back((*request)->request_line);
        }
        changed_.notify_all();
      }
      if (failed) break;
    }
    if (fds[1].revents != 0) {
      const ssize_t n = recv(*upstream, chunk, sizeof(chunk), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      if (!mute && !SendAll(client, std::string_view(chunk, static_cast<size_t>(n)))) break;
    }
  }
  {
    std::lock_guard lock(mutex_);
    conns_.erase(id);
  }
  changed_.notify_all();
  close(client);
  if (upstream) close(*upstream);
  std::lock_guard lock(mutex_);
  *done = true;
}

}  // namespace snowflake::testing
