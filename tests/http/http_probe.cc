#include "http_probe.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

#include "loopback_port.h"
#include "subprocess.h"

namespace snowflake::testing {

HttpProbe::HttpProbe(uint16_t port, std::chrono::milliseconds timeout)
    : HttpProbe(port, ProbeOptions{.source = "", .timeout = timeout}) {}

HttpProbe::HttpProbe(uint16_t port, const ProbeOptions& options) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  const auto timeout = options.timeout;
  timeval tv{static_cast<time_t>(timeout.count() / 1000),
             static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (!options.source.empty()) {
    sockaddr_in from{};
    from.sin_family = AF_INET;
    if (inet_pton(AF_INET, options.source.c_str(), &from.sin_addr) != 1 ||
        bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0) {
      close(fd);
      return;
    }
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    close(fd);
    return;
  }
  fd_ = fd;
}

HttpProbe::HttpProbe(uint16_t port, const std::filesystem::path& ca,
                     std::chrono::milliseconds timeout)
    : HttpProbe(port, ca, ProbeOptions{.source = "", .timeout = timeout}) {}

HttpProbe::HttpProbe(uint16_t port, const std::filesystem::path& ca, const ProbeOptions& options)
    : HttpProbe(port, options) {
  if (fd_ < 0) return;
  SSL_CTX* context = SSL_CTX_new(TLS_client_method());
  tls_context_ = context;
  SSL* tls = context != nullptr ? SSL_new(context) : nullptr;
  tls_ = tls;
  if (tls == nullptr || SSL_CTX_load_verify_locations(context, ca.c_str(), nullptr) != 1 ||
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(tls), "127.0.0.1") != 1) {
    close(fd_);
    fd_ = -1;
    return;
  }
  SSL_set_verify(tls, SSL_VERIFY_PEER, nullptr);
  SSL_set_fd(tls, fd_);
  if (options.hello_delay.count() > 0) std::this_thread::sleep_for(options.hello_delay);
  if (SSL_connect(tls) != 1) {
    ERR_clear_error();
    close(fd_);
    fd_ = -1;
  }
}

HttpProbe::~HttpProbe() {
  SSL_free(static_cast<SSL*>(tls_));
  SSL_CTX_free(static_cast<SSL_CTX*>(tls_context_));
  if (fd_ >= 0) close(fd_);
}

bool HttpProbe::Send(std::string_view bytes) {
  while (!bytes.empty()) {
    if (tls_ != nullptr) {
      size_t written = 0;
      if (SSL_write_ex(static_cast<SSL*>(tls_), bytes.data(), bytes.size(), &written) != 1) {
        ERR_clear_error();
        return false;
      }
      bytes.remove_prefix(written);
      continue;
    }
    const ssize_t n = send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

bool HttpProbe::Fill() {
  char chunk[16384];
  if (tls_ != nullptr) {
    size_t n = 0;
    if (SSL_read_ex(static_cast<SSL*>(tls_), chunk, sizeof chunk, &n) != 1) {
      ERR_clear_error();
      return false;
    }
    buffer_.append(chunk, n);
    return true;
  }
  const ssize_t n = recv(fd_, chunk, sizeof chunk, 0);
  if (n <= 0) return false;
  buffer_.append(chunk, static_cast<size_t>(n));
  return true;
}

HttpReply HttpProbe::Read() {
  HttpReply reply;
  size_t end = 0;
  while ((end = buffer_.find("\r\n\r\n")) == std::string::npos) {
    if (!Fill()) return reply;
  }
  const std::string head = buffer_.substr(0, end);
  size_t line_end = head.find("\r\n");
  const std::string status_line = head.substr(0, line_end);
  if (status_line.size() < 12 || status_line.compare(0, 5, "HTTP/") != 0) return reply;
  const int status = std::stoi(status_line.substr(9, 3));
  while (line_end != std::string::npos && line_end < head.size()) {
    const size_t next = head.find("\r\n", line_end + 2);
    const std::string line = head.substr(line_end + 2, next - line_end - 2);
    const size_t colon = line.find(':');
    if (colon != std::string::npos) {
      std::string name = line.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      size_t value_start = colon + 1;
      while (value_start < line.size() && line[value_start] == ' ') ++value_start;
      reply.headers[name] = line.substr(value_start);
    }
    line_end = next;
  }
  const size_t length =
      reply.headers.count("content-length") ? std::stoul(reply.headers["content-length"]) : 0;
  while (buffer_.size() < end + 4 + length) {
    if (!Fill()) return HttpReply{};
  }
  reply.body = buffer_.substr(end + 4, length);
  buffer_.erase(0, end + 4 + length);
  reply.status = status;
  return reply;
}

std::pair<size_t, bool> HttpProbe::ReadUntilClosed(std::chrono::milliseconds within) {
  size_t bytes = 0;
  const auto deadline = std::chrono::steady_clock::now() + within;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return {bytes, false};
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char chunk[4096];
    const ssize_t n = recv(fd_, chunk, sizeof chunk, MSG_DONTWAIT);
    if (n > 0) bytes += static_cast<size_t>(n);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return {bytes, true};
  }
}

bool HttpProbe::ClosedByPeer(std::chrono::milliseconds within) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char chunk[4096];
    const ssize_t n = recv(fd_, chunk, sizeof chunk, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return true;
  }
}

std::string Get(std::string_view target, std::string_view extra_headers) {
  return "GET " + std::string(target) + " HTTP/1.1\r\nHost: t\r\n" + std::string(extra_headers) +
         "\r\n";
}

HttpReply FetchOnce(uint16_t port, std::string_view target, std::string_view extra_headers) {
  HttpProbe probe(port);
  if (!probe.connected()) return {};
  return probe.Exchange(Get(target, extra_headers));
}

HttpReply FetchFrom(const std::string& source, uint16_t port, std::string_view target) {
  HttpProbe probe(port, ProbeOptions{.source = source});
  if (!probe.connected()) return {};
  return probe.Exchange(Get(target));
}

HelloAnswer SendClientHello(uint16_t port, std::chrono::milliseconds within,
                            const std::string& source) {
  HelloAnswer answer;
  HttpProbe probe(port, ProbeOptions{.source = source, .timeout = within});
  if (!probe.connected()) return answer;
  answer.connected = true;
  // The ClientHello OpenSSL writes into a memory BIO, as any TLS client would send it.
  std::string hello;
  SSL_CTX* context = SSL_CTX_new(TLS_client_method());
  SSL* tls = context != nullptr ? SSL_new(context) : nullptr;
  if (tls != nullptr) {
    BIO* in = BIO_new(BIO_s_mem());
    BIO* out = BIO_new(BIO_s_mem());
    SSL_set_bio(tls, in, out);  // takes both
    SSL_set_connect_state(tls);
    SSL_do_handshake(tls);  // wants to read: the hello is in `out`
    char* data = nullptr;
    const long size = BIO_get_mem_data(out, &data);
    if (size > 0) hello.assign(data, static_cast<size_t>(size));
    ERR_clear_error();
  }
  SSL_free(tls);
  SSL_CTX_free(context);
  if (hello.empty()) return answer;
  probe.Send(hello);  // a front that closed at once may refuse it: what it sent back counts
  const auto [bytes, closed] = probe.ReadUntilClosed(within);
  answer.bytes = bytes;
  answer.closed = closed;
  return answer;
}

uint16_t FreePort() {
  const int port = FreeLoopbackPort();
  if (port == 0) throw std::runtime_error("no free loopback port below the ephemeral range");
  return static_cast<uint16_t>(port);
}

std::vector<uint64_t> IdsOf(const std::string& json_body) {
  std::vector<uint64_t> out;
  try {
    const auto doc = nlohmann::json::parse(json_body);
    if (doc.contains("id")) out.push_back(std::stoull(doc["id"].get<std::string>()));
    if (doc.contains("ids")) {
      for (const auto& id : doc["ids"]) out.push_back(std::stoull(id.get<std::string>()));
    }
  } catch (const std::exception&) {
    out.clear();
  }
  return out;
}

ParsedExposition ParseExposition(const std::string& body) {
  const std::string script =
      "import sys\n"
      "from prometheus_client.parser import text_string_to_metric_families\n"
      "for family in text_string_to_metric_families(sys.stdin.read()):\n"
      "    for s in family.samples:\n"
      "        labels = ','.join(k + '=' + v for k, v in sorted(s.labels.items()))\n"
      "        print(f'{s.name}{{{labels}}} {s.value}')\n";
  RunOptions options;
  options.stdin_text = body;
  const RunResult parsed = RunCommand({"/usr/bin/python3", "-c", script}, options);
  if (!parsed.status.ExitedWith(0)) {
    return ParsedExposition{.samples = "",
                            .error = parsed.err.empty() ? "the parser failed" : parsed.err};
  }
  return ParsedExposition{.samples = parsed.out, .error = ""};
}

std::string HttpFrontToml(uint16_t port, std::string_view extra) {
  std::string toml = "[http]\nlisten = [\"127.0.0.1:";
  toml += std::to_string(port);
  toml += "\"]\n";
  toml += extra;
  return toml;
}

double SampleValue(const std::string& exposition, std::string_view sample) {
  for (size_t at = 0; at < exposition.size();) {
    const size_t end = std::min(exposition.find('\n', at), exposition.size());
    const std::string_view line(exposition.data() + at, end - at);
    if (line.size() > sample.size() && line.starts_with(sample) && line[sample.size()] == ' ') {
      return std::stod(std::string(line.substr(sample.size() + 1)));
    }
    at = end + 1;
  }
  return -1;
}

std::vector<uint64_t> LinesOf(const std::string& text_body) {
  std::vector<uint64_t> ids;
  size_t at = 0;
  while (at < text_body.size()) {
    const size_t end = text_body.find('\n', at);
    if (end == std::string::npos || end == at) return {};
    const std::string line = text_body.substr(at, end - at);
    if (line.find_first_not_of("0123456789") != std::string::npos) return {};
    ids.push_back(std::stoull(line));
    at = end + 1;
  }
  return ids;
}

}  // namespace snowflake::testing
