// The HTTP front's transport (docs/http.md): the listeners, the connections and their
// limits (max_connections, the allow-list, header and body sizes, idle and write
// timeouts, requests per connection), on `http.threads` threads with one Asio io_context
// each. It parses each request and hands method, target and Accept header to an
// HttpRequestHandler; it frames the HttpReply it gets back and reports requests, their
// durations, connections and refusals into the daemon's metrics. Beast and Asio stay
// inside the transport's own files, by job: the request parser (request_parser.h), the
// answer and its framing (reply_framing.h), a connection's deadlines
// (connection_deadline.h), the plain and TLS sessions (plain_session.h, tls_session.h),
// which see the front through session_front.h, and here, in http_transport.cc, the
// listeners, the accept and the limits it applies.
//
// Listen() and Stop() must be called from one thread; the serving threads are internal.
// The accessors are safe from any thread.

#ifndef SNOWFLAKE_DAEMON_HTTP_HTTP_TRANSPORT_H_
#define SNOWFLAKE_DAEMON_HTTP_HTTP_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <vector>

#include "daemon/config/config.h"
#include "daemon/http/audit_log.h"
#include "daemon/http/http_body.h"
#include "daemon/http/http_request.h"
#include "daemon/metrics/metrics.h"

namespace snowflake::daemon {

// What answers a request the transport parsed. Called on the serving threads, possibly
// several at once.
class HttpRequestHandler {
 public:
  virtual ~HttpRequestHandler();
  // `method` and `target` as on the request line, `accept` the Accept header ("" if none),
  // `client` who asks (for per-client limits): "addr:<peer address>", or with mutual TLS
  // "cert:<the certificate's subject>"; `peer`, who asks as the audit log names it (its
  // address, and with a client certificate its identity and serial). Sets `endpoint` (the
  // metrics' label). Never throws.
  virtual HttpReply Handle(std::string_view method, std::string_view target,
                           std::string_view accept, std::string_view client, const AuditPeer& peer,
                           HttpEndpoint& endpoint) noexcept = 0;
};

class HttpTransport {
 public:
  // `handler`, `metrics`, `audit` and `clock` must outlive the transport. Opens nothing
  // yet. Its refusals at accept, refused handshakes and rotations go to `audit`, which it
  // flushes every second; session-ticket keys rotate on `clock`.
  HttpTransport(const Config::Http& options, HttpRequestHandler& handler, Metrics& metrics,
                AuditLog& audit, Clock& clock);
  ~HttpTransport();  // Stop()s
  HttpTransport(const HttpTransport&) = delete;
  HttpTransport& operator=(const HttpTransport&) = delete;

  // Binds every address of options.listen and starts the threads. Errors: a message
  // naming the address that could not be bound and why (nothing is left listening).
  // REQUIRES: called once.
  [[nodiscard]] tl::expected<void, std::string> Listen();

  // Closes the listeners and every connection and joins the threads. Idempotent.
  void Stop() noexcept;

  // The bound ports, in the order of options.listen (after Listen()).
  std::vector<uint16_t> ports() const;
  // Open connections now, replies sent and connections refused (limit, allow) so far.
  uint64_t connections() const noexcept;
  uint64_t replies() const noexcept;
  uint64_t refused() const noexcept;

  class Impl;  // internal (http_transport.cc)

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_HTTP_HTTP_TRANSPORT_H_
