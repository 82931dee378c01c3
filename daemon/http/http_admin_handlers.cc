#include "daemon/http/http_admin_handlers.h"

#include <exception>
#include <string>

#include "daemon/fronts/daemon_answers.h"
#include "protocol/vocabulary.h"
#include "snowflake/client.h"

namespace snowflake::daemon {
namespace {

using Endpoint = HttpEndpoint;

HttpReply NotHere() {
  return ErrorReply(404, vocab::ErrorName(vocab::ErrorCode::kNotFound),
                    "no such endpoint on the admin listener: it serves /healthz, /v1/status "
                    "and /metrics; take IDs from the front's listeners ([http] listen)");
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
  // Decided on the path alone, before the method or a query is looked at: /v1/id and
  // /v1/ids are unknown here, whatever else the request says.
  if (named != Endpoint::kHealthz && named != Endpoint::kStatus && named != Endpoint::kMetrics) {
    endpoint = Endpoint::kOther;
    return NotHere();
  }
  endpoint = named;
  if (!route) return ErrorReply(route.error().status, route.error().code, route.error().message);
  switch (named) {
    case Endpoint::kHealthz:
      return Healthz();
    case Endpoint::kStatus:
      return Status();
    case Endpoint::kMetrics: {
      HttpReply reply;
      reply.content_type = kMetricsContentType;
      reply.body = metrics_.Scrape();
      return reply;
    }
    case Endpoint::kId:
    case Endpoint::kIds:
    case Endpoint::kOther:
      break;
  }
  return NotHere();
}

HttpReply HttpAdminHandlers::Healthz() const {
  const HealthAnswer health = Health(runtime_dir_);
  HttpReply reply;
  reply.status = health.serving ? 200 : 503;
  reply.retry_after_s = health.serving ? 0 : 1;
  reply.body = health.body.dump();
  return reply;
}

// The object `snowflakectl status --json` prints (docs/cli.md), whole.
HttpReply HttpAdminHandlers::Status() const {
  auto status = StatusAnswer(runtime_dir_, board_);
  if (!status) {
    // 503 whatever the cause, as /healthz: no status to give; the code says why.
    return ErrorReply(503, ClientErrorName(status.error().code), status.error().message);
  }
  HttpReply reply;
  reply.body = status->dump();
  return reply;
}

}  // namespace snowflake::daemon
