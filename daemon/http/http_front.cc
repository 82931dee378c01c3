#include "daemon/http/http_front.h"

#include <spdlog/spdlog.h>

#include <exception>

#include "daemon/config/net_address.h"

namespace snowflake::daemon {

HttpFront::HttpFront(const FrontContext& context)
    : options_(context.config.http),
      handlers_(context.config, context.board, context.metrics),
      transport_(context.config.http, handlers_, context.metrics) {}

HttpFront::~HttpFront() { Stop(); }

tl::expected<void, std::string> HttpFront::Start() noexcept {
  try {
    started_ = true;
    if (auto listening = transport_.Listen(); !listening) {
      transport_.Stop();
      return tl::unexpected(listening.error());
    }
    std::string where;
    for (size_t i = 0; i < options_.listen.size(); ++i) {
      where += (i ? ", " : "") + options_.listen[i];
    }
    spdlog::info("http front listening on {} ({} threads, at most {} connections)", where,
                 options_.threads, options_.max_connections);
    return {};
  } catch (const std::exception& e) {
    transport_.Stop();
    return tl::unexpected(std::string("http front: ") + e.what());
  }
}

void HttpFront::Stop() noexcept {
  if (!started_ || stopped_) return;
  stopped_ = true;
  transport_.Stop();
  spdlog::info("http front stopped");
}

FrontStatus HttpFront::Status() const {
  FrontStatus status;
  status.name = "http";
  status.connections = transport_.connections();
  status.requests = transport_.replies();
  status.refused = transport_.refused();
  // The configured address with the port actually bound (a configured port 0 gets one).
  const std::vector<uint16_t> ports = transport_.ports();
  for (size_t i = 0; i < options_.listen.size() && i < ports.size(); ++i) {
    auto address = ParseListenAddress(options_.listen[i]);
    if (!address) continue;
    const bool v6 = address->host.find(':') != std::string::npos;
    status.listen.push_back((v6 ? "[" + address->host + "]" : address->host) + ":" +
                            std::to_string(ports[i]));
  }
  return status;
}

}  // namespace snowflake::daemon
