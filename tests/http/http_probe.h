// A raw HTTP/1.1 connection for tests of the HTTP front: it sends exactly the bytes a test
// gives (well-formed or hostile) and parses replies itself, so nothing between the test
// and the daemon fixes up a malformed request. Plain TCP, or TLS (OpenSSL, verifying the
// front's certificate for 127.0.0.1 against a CA file) for a TLS front.
//
// An HttpProbe must be used from one thread.

#ifndef SNOWFLAKE_TESTS_HTTP_HTTP_PROBE_H_
#define SNOWFLAKE_TESTS_HTTP_HTTP_PROBE_H_

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace snowflake::testing {

struct HttpReply {
  int status = 0;  // 0: the connection closed (or timed out) before a whole reply
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  std::string Header(const std::string& name) const {
    auto found = headers.find(name);
    return found == headers.end() ? "" : found->second;
  }
};

// How an HttpProbe connects, beyond the defaults.
struct ProbeOptions {
  std::string source;  // an IPv4 address of 127.0.0.0/8 to connect from; "" for any
  std::chrono::milliseconds timeout = std::chrono::seconds(10);
  // TLS only: connect, then wait this long before the ClientHello (a slow handshake).
  std::chrono::milliseconds hello_delay{0};
};

class HttpProbe {
 public:
  // Connects to 127.0.0.1:port; connected() says whether it worked.
  explicit HttpProbe(uint16_t port, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  HttpProbe(uint16_t port, const ProbeOptions& options);
  // Over TLS: connects and completes the handshake, verifying the front's certificate
  // against `ca`; connected() is false if either failed. `timeout` bounds each read, so a
  // reply that never comes whole reads as status 0 after it.
  HttpProbe(uint16_t port, const std::filesystem::path& ca,
            std::chrono::milliseconds timeout = std::chrono::seconds(10));
  HttpProbe(uint16_t port, const std::filesystem::path& ca, const ProbeOptions& options);
  ~HttpProbe();
  HttpProbe(const HttpProbe&) = delete;
  HttpProbe& operator=(const HttpProbe&) = delete;

  bool connected() const { return fd_ >= 0; }
  // Sends raw bytes; false if the peer closed.
  bool Send(std::string_view bytes);
  // Reads one reply (Content-Length framed).
  HttpReply Read();
  // Send + Read.
  HttpReply Exchange(std::string_view bytes) {
    Send(bytes);
    return Read();
  }
  // True if the peer closed the connection within `within` (reads and drops any bytes;
  // over TLS, the raw bytes of its records).
  bool ClosedByPeer(std::chrono::milliseconds within);
  // Reads raw bytes (over TLS, its records) until the peer closes or resets the connection
  // or `within` passes: how many arrived, and whether it closed.
  std::pair<size_t, bool> ReadUntilClosed(std::chrono::milliseconds within);

 private:
  bool Fill();  // appends what arrives to buffer_; false on close, error or timeout

  int fd_ = -1;
  void* tls_context_ = nullptr;  // SSL_CTX*, over TLS
  void* tls_ = nullptr;          // SSL*, over TLS
  std::string buffer_;
};

// What a front sent back to a TLS ClientHello on a fresh connection from 127.0.0.1.
struct HelloAnswer {
  bool connected = false;  // the TCP connection was made
  size_t bytes = 0;        // bytes the front sent (a ServerHello is hundreds)
  bool closed = false;     // the front closed (or reset) the connection within the wait
};
// Connects to 127.0.0.1:port (from `source` if set), sends a ClientHello made by OpenSSL
// and reads until the front closes or `within` passes.
HelloAnswer SendClientHello(uint16_t port, std::chrono::milliseconds within,
                            const std::string& source = "");

// "GET <target> HTTP/1.1\r\nHost: t\r\n<extra>\r\n".
std::string Get(std::string_view target, std::string_view extra_headers = "");

// One GET on a fresh connection.
HttpReply FetchOnce(uint16_t port, std::string_view target, std::string_view extra_headers = "");
// One GET on a fresh connection from `source` (an address of 127.0.0.0/8).
HttpReply FetchFrom(const std::string& source, uint16_t port, std::string_view target);

// A TCP port on 127.0.0.1 that was free a moment ago (FreeLoopbackPort; throws if none).
uint16_t FreePort();

// A /metrics body as Prometheus' own Python parser (python3-prometheus-client) reads it:
// one line per sample, "name{k=v,k=v} value", labels sorted by name. Empty `error` on
// success; else what the parser said (the body is not valid exposition text).
struct ParsedExposition {
  std::string samples;
  std::string error;
};
ParsedExposition ParseExposition(const std::string& body);

// The value of one sample of an exposition as prometheus-cpp writes it
// ("name{label=\"value\"} 12"); -1 if there is no such line.
double SampleValue(const std::string& exposition, std::string_view sample);

// The config text of a daemon with the HTTP front on 127.0.0.1:port (and `extra` lines of
// [http], e.g. "threads = 2\n").
std::string HttpFrontToml(uint16_t port, std::string_view extra = "");

// The decimal strings of {"ids":[...]} or {"id":"..."}; empty if the body is not that.
std::vector<uint64_t> IdsOf(const std::string& json_body);
// The IDs of a text/plain reply (one decimal per line); empty if the body is not that.
std::vector<uint64_t> LinesOf(const std::string& text_body);

}  // namespace snowflake::testing

#endif  // SNOWFLAKE_TESTS_HTTP_HTTP_PROBE_H_
