// The admin listener (docs/http.md, "The admin listener"): /healthz, /v1/status and
// /metrics on addresses of their own ([http] admin_listen), so operators and scrapers
// reach them on a port that hands out no IDs, and the ID listeners serve no status or
// metrics. A second HttpTransport with its own options (admin_listen, admin_allow, plain
// HTTP, kAdminMaxConnections, one thread) and the admin handlers
// (http_admin_handlers.h), which have no way to the ring's IDs. It reports into the
// daemon's Metrics beside the ID listeners (the same series); its own figures are its
// FrontStatus, "http-admin".
//
// Start() and Stop() must be called from one thread; Status() and ports() from any.

#ifndef SNOWFLAKE_DAEMON_HTTP_HTTP_ADMIN_FRONT_H_
#define SNOWFLAKE_DAEMON_HTTP_HTTP_ADMIN_FRONT_H_

#include <cstdint>
#include <string>
#include <tl/expected.hpp>
#include <vector>

#include "daemon/fronts/front.h"
#include "daemon/http/audit_log.h"
#include "daemon/http/http_admin_handlers.h"
#include "daemon/http/http_transport.h"

namespace snowflake::daemon {

// Connections the admin listener holds at once: a few scrapers and an operator's curl.
inline constexpr uint64_t kAdminMaxConnections = 16;

// The transport options of the admin listener, from [http]: listen = admin_listen, allow
// = admin_allow, no TLS (it speaks plain HTTP whatever the ID listeners speak), one
// thread, at most kAdminMaxConnections (and as many per source); the sizes and timeouts
// are the front's.
Config::Http AdminTransportOptions(const Config::Http& http);

class HttpAdminFront final : public Front {
 public:
  // Opens nothing: Start() binds every address of config.http.admin_listen.
  // REQUIRES: config.http.admin_listen is not empty.
  explicit HttpAdminFront(const FrontContext& context);
  ~HttpAdminFront() override;  // Stop()s
  HttpAdminFront(const HttpAdminFront&) = delete;
  HttpAdminFront& operator=(const HttpAdminFront&) = delete;

  // Errors: a message naming the address that could not be bound and why.
  tl::expected<void, std::string> Start() noexcept override;
  // Closes the listeners and every connection and joins the thread. Idempotent.
  void Stop() noexcept override;
  FrontStatus Status() const override;

  // The bound ports, in the order of config.http.admin_listen.
  std::vector<uint16_t> ports() const { return transport_.ports(); }

 private:
  const Config::Http options_;  // AdminTransportOptions()
  AuditLog audit_;              // its refusals at accept; before transport_, which writes to it
  HttpAdminHandlers handlers_;
  HttpTransport transport_;  // after handlers_: stopped and destroyed first
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_HTTP_HTTP_ADMIN_FRONT_H_
