#include "daemon/http/http_admin_front.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>

#include "daemon/http/http_front.h"

namespace snowflake::daemon {

Config::Http AdminTransportOptions(const Config::Http& http) {
  Config::Http options = http;
  options.listen = http.admin_listen;
  options.allow = http.admin_allow;
  options.admin_listen.clear();
  options.admin_allow.clear();
  // Plain HTTP: the transport speaks TLS exactly when a certificate is set.
  options.tls_cert_file.clear();
  options.tls_key_file.clear();
  options.tls_client_ca_file.clear();
  options.tls_client_crl_file.clear();
  options.threads = 1;
  options.max_connections = kAdminMaxConnections;
  options.max_connections_per_source =
      std::min(http.max_connections_per_source, kAdminMaxConnections);
  // Authorization is the ID listeners' ([[http.authorize]] names TLS identities a plain
  // listener never sees); the admin listener's is admin_allow.
  options.authorize.clear();
  return options;
}

HttpAdminFront::HttpAdminFront(const FrontContext& context)
    : options_(AdminTransportOptions(context.config.http)),
      audit_(context.clock),
      handlers_(context.config, context.board, context.metrics),
      transport_(options_, handlers_, context.metrics, audit_, context.clock) {}

HttpAdminFront::~HttpAdminFront() { Stop(); }

tl::expected<void, std::string> HttpAdminFront::Start() noexcept {
  started_ = true;
  auto where = ListenOn(transport_, options_.listen);
  if (!where) return tl::unexpected("http admin listener: " + where.error());
  spdlog::info("http admin listener on {} (plain HTTP: /healthz, /v1/status, /metrics)", *where);
  return {};
}

void HttpAdminFront::Stop() noexcept {
  if (!started_ || stopped_) return;
  stopped_ = true;
  StopTransport(transport_, audit_);
  spdlog::info("http admin listener stopped");
}

FrontStatus HttpAdminFront::Status() const {
  return TransportStatus("http-admin", options_.listen, transport_);
}

}  // namespace snowflake::daemon
