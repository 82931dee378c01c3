#include "daemon/http/http_handlers.h"

#include <exception>
#include <span>
#include <vector>

#include "daemon/fronts/daemon_answers.h"
#include "protocol/vocabulary.h"
#include "snowflake/client.h"

namespace snowflake::daemon {
namespace {

using Endpoint = HttpEndpoint;

// The reply to a take (or a read of the ring) that failed: the vocabulary's code, the
// library's own for the condition.
HttpReply RingErrorReply(ClientError code, std::string_view message) {
  const HttpFailure failure = HttpFailureFor(code);
  return ErrorReply(failure.status, failure.code, message);
}

HttpReply RefusalReply(const TakeRefusal& refusal) {
  switch (refusal.why) {
    case TakeRefusal::Why::kInvalidServiceName:
      return ErrorReply(400, vocab::ErrorName(vocab::ErrorCode::kInvalidServiceName),
                        refusal.message);
    case TakeRefusal::Why::kTooManyServices:
      return ErrorReply(429, vocab::ErrorName(vocab::ErrorCode::kTooManyServices), refusal.message);
    case TakeRefusal::Why::kRing:
      break;
  }
  return RingErrorReply(refusal.ring_error, refusal.message);
}

}  // namespace

HttpHandlers::HttpHandlers(const Config& config, StatusBoard& board, Metrics& metrics)
    : runtime_dir_(config.daemon.runtime_dir),
      board_(board),
      metrics_(metrics),
      services_("http", config.daemon.runtime_dir, config.http.max_services, metrics),
      share_(config.http.max_share, config.http.per_client_ids_per_s) {}

HttpReply HttpHandlers::Handle(std::string_view method, std::string_view target,
                               std::string_view accept, std::string_view client,
                               HttpEndpoint& endpoint) noexcept {
  try {
    return Route(method, target, accept, client, endpoint);
  } catch (const std::exception& e) {
    return ErrorReply(500, vocab::ErrorName(vocab::ErrorCode::kSystemError), e.what());
  } catch (...) {
    return ErrorReply(500, vocab::ErrorName(vocab::ErrorCode::kSystemError), "");
  }
}

HttpReply HttpHandlers::Route(std::string_view method, std::string_view target,
                              std::string_view accept, std::string_view client,
                              HttpEndpoint& endpoint) {
  auto route = RouteHttpRequest(method, target, accept);
  if (!route) {
    endpoint = route.error().endpoint;
    return ErrorReply(route.error().status, route.error().code, route.error().message);
  }
  endpoint = route->endpoint;
  switch (route->endpoint) {
    case Endpoint::kId:
    case Endpoint::kIds:
      return TakeIds(*route, client);
    case Endpoint::kHealthz:
      return Healthz();
    case Endpoint::kStatus:
      return Status();
    case Endpoint::kMetrics:
      return MetricsText();
    case Endpoint::kOther:
      break;
  }
  return ErrorReply(404, vocab::ErrorName(vocab::ErrorCode::kNotFound), "no such endpoint");
}

HttpReply HttpHandlers::TakeIds(const HttpRoute& route, std::string_view client) {
  // Before the take: a throttled request costs the ring nothing.
  const auto now = IdShare::Clock::now();
  if (const IdShare::Admission admission = share_.Admit(client, route.count, now);
      admission.verdict != IdShare::Verdict::kAdmitted) {
    const bool front = admission.verdict == IdShare::Verdict::kFrontShare;
    (front ? metrics_.http().throttled_share : metrics_.http().throttled_client).Increment();
    HttpReply reply = ErrorReply(
        429, vocab::ErrorName(vocab::ErrorCode::kThrottled),
        front ? "remote callers have taken this host's share of its IDs ([http] max_share); "
                "retry shortly or use another daemon"
              : "this client has taken its share of this host's IDs ([http] "
                "per_client_ids_per_s); retry later or use another daemon");
    reply.retry_after_s = admission.retry_after_s;
    return reply;
  }
  // One ID (the common request) needs no allocation for the IDs.
  uint64_t one_id = 0;
  std::vector<uint64_t> many;
  if (route.count > 1) many.resize(route.count);
  const std::span<uint64_t> ids =
      route.count > 1 ? std::span<uint64_t>(many) : std::span<uint64_t>(&one_id, 1);
  if (auto taken = services_.Take(route.service, ids); !taken) return RefusalReply(taken.error());

  HttpReply reply;
  IdsFormat format = route.endpoint == Endpoint::kIds ? IdsFormat::kJsonBatch : IdsFormat::kJsonOne;
  if (route.plain) {
    reply.content_type = kTextContentType;
    format = IdsFormat::kText;
  }
  AppendIdsBody(ids, format, reply.body);
  return reply;
}

HttpReply HttpHandlers::Healthz() {
  const HealthAnswer health = Health(runtime_dir_);
  HttpReply reply;
  reply.status = health.serving ? 200 : 503;
  reply.retry_after_s = health.serving ? 0 : 1;
  reply.body = health.body.dump();
  return reply;
}

// The object `snowflakectl status --json` prints, key for key (docs/cli.md).
HttpReply HttpHandlers::Status() {
  auto status = StatusAnswer(runtime_dir_, board_);
  if (!status) {
    // 503 whatever the cause, as /healthz: no status to give; the code says why.
    return ErrorReply(503, ClientErrorName(status.error().code), status.error().message);
  }
  HttpReply reply;
  reply.body = status->dump();
  return reply;
}

HttpReply HttpHandlers::MetricsText() {
  HttpReply reply;
  reply.content_type = kMetricsContentType;
  reply.body = metrics_.Scrape();
  return reply;
}

}  // namespace snowflake::daemon
