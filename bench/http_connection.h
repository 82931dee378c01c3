// What the HTTP benchmarks share: a keep-alive HTTP/1.1 client connection on 127.0.0.1,
// plain or TLS, with a minimal reply parser (and a Redis INCR on the same socket code),
// and the percentiles of timed calls.

#ifndef SNOWFLAKE_BENCH_HTTP_CONNECTION_H_
#define SNOWFLAKE_BENCH_HTTP_CONNECTION_H_

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "loopback.h"

namespace snowflake::bench {

[[noreturn]] inline void Die(const std::string& what) {
  std::fprintf(stderr, "%s: %s\n", program_invocation_short_name, what.c_str());
  std::exit(1);
}

// A TLS client context trusting `ca_file` (a full handshake each time: no session cache).
inline SSL_CTX* ClientTlsContext(const std::string& ca_file) {
  SSL_CTX* context = SSL_CTX_new(TLS_client_method());
  if (context == nullptr || SSL_CTX_load_verify_locations(context, ca_file.c_str(), nullptr) != 1) {
    Die("cannot load the CA file " + ca_file);
  }
  SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nullptr);
  SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION);
  SSL_CTX_set_session_cache_mode(context, SSL_SESS_CACHE_OFF);
  return context;
}

// One keep-alive HTTP/1.1 connection on 127.0.0.1 with a minimal reply parser; over TLS
// (OpenSSL on the blocking socket) when given a client context.
class Connection {
 public:
  explicit Connection(int port, SSL_CTX* tls = nullptr) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    sockaddr_in address = snowflake::bench::LoopbackAddress(static_cast<uint16_t>(port));
    if (connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
      Die("cannot connect to 127.0.0.1:" + std::to_string(port));
    }
    if (tls != nullptr) {
      ssl_ = SSL_new(tls);
      SSL_set_fd(ssl_, fd_);
      SSL_set1_host(ssl_, "127.0.0.1");
      if (SSL_connect(ssl_) != 1)
        Die("TLS handshake with 127.0.0.1:" + std::to_string(port) + " failed");
    }
  }
  ~Connection() {
    if (ssl_ != nullptr) SSL_free(ssl_);
    close(fd_);
  }

  // Sends `request` and returns the reply body. A 503 (the daemon paused: on a loaded
  // shared machine its reservation renewal can lag) is retried every millisecond for up to
  // 10 s and counted; anything else but 200 is fatal.
  std::string_view Get(const std::string& request) {
    for (int attempt = 0;; ++attempt) {
      std::string_view body;
      if (GetOnce(request, body)) return body;
      unavailable.fetch_add(1, std::memory_order_relaxed);
      if (attempt == 10'000) Die("the front stayed unavailable (503) for 10 s");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  // One Redis INCR in RESP on this connection (a Redis port, not a front's).
  void Incr() {
    Send("*2\r\n$4\r\nINCR\r\n$9\r\nbench:rps\r\n");
    size_t end;
    while ((end = buffer_.find("\r\n")) == std::string::npos) Fill();
    if (buffer_[0] != ':') Die("INCR reply: " + buffer_.substr(0, 200));
    consumed_ = end + 2;
  }

  static inline std::atomic<uint64_t> unavailable{0};

 private:
  // Sends `request` whole and drops the previous reply from the buffer.
  void Send(std::string_view request) {
    const ssize_t sent = ssl_ != nullptr
                             ? SSL_write(ssl_, request.data(), static_cast<int>(request.size()))
                             : send(fd_, request.data(), request.size(), MSG_NOSIGNAL);
    if (sent != static_cast<ssize_t>(request.size())) Die("send failed");
    buffer_.erase(0, consumed_);
    consumed_ = 0;
  }

  bool GetOnce(const std::string& request, std::string_view& body) {
    Send(request);
    size_t end;
    while ((end = buffer_.find("\r\n\r\n")) == std::string::npos) Fill();
    const bool unavailable_reply = buffer_.compare(0, 12, "HTTP/1.1 503") == 0;
    if (!unavailable_reply && buffer_.compare(0, 12, "HTTP/1.1 200") != 0) {
      Die("reply: " + buffer_.substr(0, 200));
    }
    const size_t at = buffer_.find("Content-Length: ");
    if (at == std::string::npos || at > end) Die("no Content-Length");
    const size_t length = std::strtoul(buffer_.c_str() + at + 16, nullptr, 10);
    while (buffer_.size() < end + 4 + length) Fill();
    consumed_ = end + 4 + length;
    body = std::string_view(buffer_).substr(end + 4, length);
    return !unavailable_reply;
  }

  void Fill() {
    char chunk[65536];
    const ssize_t n =
        ssl_ != nullptr ? SSL_read(ssl_, chunk, sizeof chunk) : recv(fd_, chunk, sizeof chunk, 0);
    if (n <= 0) Die("connection closed");
    buffer_.append(chunk, static_cast<size_t>(n));
  }

  int fd_ = -1;
  SSL* ssl_ = nullptr;
  std::string buffer_;
  size_t consumed_ = 0;
};

// A GET of `target` on a keep-alive connection, asking for text/plain.
inline std::string Request(std::string_view target) {
  return "GET " + std::string(target) + " HTTP/1.1\r\nHost: b\r\nAccept: text/plain\r\n\r\n";
}

// The median and the 99th percentile of timed calls (sorts them); 0 for none.
struct Percentiles {
  double p50 = 0;
  double p99 = 0;
};

inline Percentiles Of(std::vector<double>& values) {
  if (values.empty()) return {};
  std::sort(values.begin(), values.end());
  return {values[values.size() / 2], values[std::min(values.size() - 1, values.size() * 99 / 100)]};
}

}  // namespace snowflake::bench

#endif  // SNOWFLAKE_BENCH_HTTP_CONNECTION_H_
