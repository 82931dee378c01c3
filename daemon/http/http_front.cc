#include "daemon/http/http_front.h"

#include <spdlog/spdlog.h>

#include <exception>
#include <utility>

#include "daemon/config/net_address.h"

namespace snowflake::daemon {

HttpFront::HttpFront(const FrontContext& context)
    : options_(context.config.http),
      audit_(context.clock),
      handlers_(context.config, context.board, context.metrics, audit_),
      transport_(context.config.http, handlers_, context.metrics, audit_, context.clock) {}

HttpFront::~HttpFront() { Stop(); }

tl::expected<void, std::string> HttpFront::Start() noexcept {
  started_ = true;
  auto where = ListenOn(transport_, options_.listen);
  if (!where) return tl::unexpected(where.error());
  spdlog::info("http front listening on {} ({} threads, at most {} connections)", *where,
               options_.threads, options_.max_connections);
  return {};
}

tl::expected<std::string, std::string> ListenOn(HttpTransport& transport,
                                                const std::vector<std::string>& listen) noexcept {
  try {
    if (auto listening = transport.Listen(); !listening) {
      transport.Stop();
      return tl::unexpected(listening.error());
    }
    std::string where;
    for (size_t i = 0; i < listen.size(); ++i) where += (i ? ", " : "") + listen[i];
    return where;
  } catch (const std::exception& e) {
    transport.Stop();
    return tl::unexpected(std::string("http front: ") + e.what());
  }
}

void HttpFront::Stop() noexcept {
  if (!started_ || stopped_) return;
  stopped_ = true;
  StopTransport(transport_, audit_);
  spdlog::info("http front stopped");
}

FrontStatus HttpFront::Status() const {
  return TransportStatus("http", options_.listen, transport_);
}

void StopTransport(HttpTransport& transport, AuditLog& audit) noexcept {
  transport.Stop();
  audit.FlushAll();
}

FrontStatus TransportStatus(std::string name, const std::vector<std::string>& listen,
                            const HttpTransport& transport) {
  FrontStatus status;
  status.name = std::move(name);
  status.connections = transport.connections();
  status.requests = transport.replies();
  status.refused = transport.refused();
  const std::vector<uint16_t> ports = transport.ports();
  for (size_t i = 0; i < listen.size() && i < ports.size(); ++i) {
    auto address = ParseListenAddress(listen[i]);
    if (!address) continue;
    const bool v6 = address->host.find(':') != std::string::npos;
    status.listen.push_back((v6 ? "[" + address->host + "]" : address->host) + ":" +
                            std::to_string(ports[i]));
  }
  return status;
}

}  // namespace snowflake::daemon
