// The HTTP front (docs/http.md): remote callers take IDs over HTTP/1.1 from this host's
// ring. GET /v1/id, /v1/ids, /healthz, /v1/status and /metrics (Prometheus text).
//
// The first Front (daemon/fronts/front.h): its transport (http_transport.h: listeners,
// connections, limits, Beast and Asio), its routing and handlers (http_handlers.h) and
// its replies (http_body.h, with the bodies of protocol/id_reply.h), put together. It
// takes IDs through the fronts' shared RingServices and never generates any; it serves
// on its own threads, so a slow or hostile peer never blocks the fill loop; it reads the
// daemon's status only through the StatusBoard and reports into the daemon's Metrics.
//
// Start() and Stop() must be called from one thread; Status() and ports() from any.

#ifndef SNOWFLAKE_DAEMON_HTTP_HTTP_FRONT_H_
#define SNOWFLAKE_DAEMON_HTTP_HTTP_FRONT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <tl/expected.hpp>
#include <vector>

#include "daemon/fronts/front.h"
#include "daemon/http/audit_log.h"
#include "daemon/http/http_handlers.h"
#include "daemon/http/http_transport.h"

namespace snowflake::daemon {

// Listens on every address of `listen` through `transport`, stopping it again on a
// failure: the addresses joined for the log, or why not.
tl::expected<std::string, std::string> ListenOn(HttpTransport& transport,
                                                const std::vector<std::string>& listen) noexcept;

// What a front over `transport` reports (FrontStatus): `name`, its figures, and the
// configured addresses `listen` with the ports actually bound (a configured port 0 gets
// one), "127.0.0.1:8080" or "[::1]:8080".
FrontStatus TransportStatus(std::string name, const std::vector<std::string>& listen,
                            const HttpTransport& transport);

// Stops `transport` (every connection closed, its threads joined), then writes what
// `audit` dropped in its last interval.
void StopTransport(HttpTransport& transport, AuditLog& audit) noexcept;

class HttpFront final : public Front {
 public:
  // Opens nothing: Start() binds every address of config.http.listen and starts
  // config.http.threads threads. REQUIRES: config.http.listen is not empty.
  explicit HttpFront(const FrontContext& context);
  ~HttpFront() override;  // Stop()s
  HttpFront(const HttpFront&) = delete;
  HttpFront& operator=(const HttpFront&) = delete;

  // Errors: a message naming the address that could not be bound and why.
  tl::expected<void, std::string> Start() noexcept override;
  // Closes the listeners and every connection, joins the threads and logs "http front
  // stopped" (the line that shows an operator the front went first). Idempotent.
  void Stop() noexcept override;
  FrontStatus Status() const override;

  // The bound ports, in the order of config.http.listen.
  std::vector<uint16_t> ports() const { return transport_.ports(); }

 private:
  const Config::Http options_;
  AuditLog audit_;  // before handlers_ and transport_, which write to it
  HttpHandlers handlers_;
  HttpTransport transport_;  // after handlers_: stopped and destroyed first
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_HTTP_HTTP_FRONT_H_
