#include "daemon/http/http_admin_handlers.h"

#include <exception>
#include <string>

#include "daemon/fronts/daemon_answers.h"
#include "daemon/http/http_handlers.h"
#include "protocol/vocabulary.h"
#include "snowflake/client.h"

namespace snowflake::daemon {
namespace {

using Endpoint = HttpEndpoint;

HttpReply NotHere() {
  return ErrorReply(404, vocab::ErrorName(vocab::ErrorCode::kNotFound),
                    "no such endpoint on the admin listener: it serves /healthz, /v1/status "
                    "and /metrics; take, decode and bound IDs on the front's listeners ([http] "
                    "listen)");
}

}  // namespace

HttpAdminHandlers::HttpAdminHandlers(const Config& config, const StatusBoard& board,
                                     Metrics& metrics)
    : runtime_dir_(config.daemon.runtime_dir), board_(board), metrics_(metrics) {}

HttpReply HttpAdminHandlers::Handle(std::string_view method, std::string_view target,
                                    std::string_view accept, std::string_view, const AuditPeer&,
                                    HttpEndpoint& endpoint) noexcept {
  try {
    return Route(method, target, accept, endpoint);
  } catch (const std::exception& e) {
    return ErrorReply(500, vocab::ErrorName(vocab::ErrorCode::kSystemError), e.what());
  } catch (...) {
    return ErrorReply(500, vocab::ErrorName(vocab::ErrorCode::kSystemError), "");
  }
}

HttpReply HttpAdminHandlers::Route(std::string_view method, std::string_view target,
                                   std::string_view accept, HttpEndpoint& endpoint) {
  auto route = RouteHttpRequest(method, target, accept);
  const Endpoint named = route ? route->endpoint : route.error().endpoint;
  // Decided on the path alone, before the method or a query is looked at: /v1/id,
  // /v1/ids, /v1/decode and /v1/bounds are unknown here, whatever else the request says
  // (the ID listeners serve the callers of IDs; docs/http.md says why decode and bounds are
  // theirs).
  if (named != Endpoint::kHealthz && named != Endpoint::kStatus && named != Endpoint::kMetrics) {
    endpoint = Endpoint::kOther;
    return NotHere();
  }
  endpoint = named;
  if (!route) return ErrorReply(route.error().status, route.error().code, route.error().message);
  switch (named) {
    case Endpoint::kHealthz:
      return HealthzReply(Health(runtime_dir_));
    case Endpoint::kStatus:
      // The object `snowflakectl status --json` prints (docs/cli.md), whole.
      return StatusReply(StatusAnswer(runtime_dir_, board_));
    case Endpoint::kMetrics:
      return MetricsReply(metrics_);
    case Endpoint::kId:
    case Endpoint::kIds:
    case Endpoint::kDecode:
    case Endpoint::kBounds:
    case Endpoint::kOther:
      break;
  }
  return NotHere();
}

}  // namespace snowflake::daemon
