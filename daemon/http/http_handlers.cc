#include "daemon/http/http_handlers.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <span>
#include <vector>

#include "daemon/fronts/daemon_answers.h"
#include "daemon/http/layout_replies.h"
#include "protocol/id_reply.h"
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

// Status keys a remote caller is not shown (docs/security.md, "The network"): where the
// daemon keeps its files, its pid, its register holder, and the register's location and
// errors (a file path, etcd endpoints). The local status (`snowflakectl status`) has them.
bool Withheld(std::string_view key) {
  return key == "pid" || key == "runtime_dir" || key == "state_dir" || key == "holder_id" ||
         key == "register_location" || key == "location" || key == "last_error";
}

// `text` with every occurrence of `path` replaced by `name`.
void ReplaceAll(std::string& text, const std::string& path, std::string_view name) {
  if (path.empty()) return;
  for (size_t at = text.find(path); at != std::string::npos; at = text.find(path, at)) {
    text.replace(at, path.size(), name);
    at += name.size();
  }
}

// The vocabulary's sentence for a status object's reason code and detail: what a remote
// caller gets in place of the daemon's own sentences ("reason", "status_text"), which may
// name the register's location and quote its last error. "" for a code this build does
// not know.
std::string VocabularyReason(const nlohmann::json& object) {
  const auto code = object.find("reason_code");
  if (code == object.end() || !code->is_string()) return "";
  const auto detail = object.find("reason_detail");
  const int64_t value =
      detail != object.end() && detail->is_number_integer() ? detail->get<int64_t>() : 0;
  for (const vocab::ReasonWords& row : vocab::kReasons) {
    if (row.code == code->get<std::string>()) return vocab::DescribeReason(row.reason, value);
  }
  return "";
}

// "max_share 0.5", as the config writes it.
std::string ShareLimit(double max_share) {
  char text[64];
  std::snprintf(text, sizeof text, "max_share %g", max_share);
  return text;
}

}  // namespace

std::string HttpHandlers::Scrubbed(std::string text) const {
  ReplaceAll(text, runtime_dir_.string(), "<runtime_dir>");
  ReplaceAll(text, state_dir_.string(), "<state_dir>");
  return text;
}

void HttpHandlers::ForRemoteCallers(nlohmann::json& doc) const {
  if (doc.is_string()) {
    doc = Scrubbed(doc.get<std::string>());
  } else if (doc.is_object()) {
    if (doc.contains("reason_code")) {
      const std::string reason = VocabularyReason(doc);
      for (const char* key : {"reason", "status_text"}) {
        if (doc.contains(key)) doc[key] = reason;
      }
    }
    for (auto it = doc.begin(); it != doc.end();) {
      if (Withheld(it.key())) {
        it = doc.erase(it);
      } else {
        ForRemoteCallers(it.value());
        ++it;
      }
    }
  } else if (doc.is_array()) {
    for (auto& item : doc) ForRemoteCallers(item);
  }
}

HttpHandlers::HttpHandlers(const Config& config, StatusBoard& board, Metrics& metrics,
                           AuditLog& audit)
    : runtime_dir_(config.daemon.runtime_dir),
      state_dir_(config.daemon.state_dir),
      // The config was checked at load (id.layout, id.epoch): Create() cannot fail here.
      layout_(IdLayout::Create(config.id.epoch_unix_ms, config.id.bits).value_or(IdLayout())),
      admin_elsewhere_(!config.http.admin_listen.empty()),
      share_limit_(ShareLimit(config.http.max_share)),
      client_limit_("per_client_ids_per_s " + std::to_string(config.http.per_client_ids_per_s)),
      board_(board),
      metrics_(metrics),
      audit_(audit),
      services_("http", config.daemon.runtime_dir, config.http.max_services, metrics),
      share_(config.http.max_share, config.http.per_client_ids_per_s, layout_.ids_per_ms()) {
  for (const Config::Http::Grant& grant : config.http.authorize) grants_[grant.identity] = grant;
}

std::optional<HttpReply> HttpHandlers::Unauthorized(const HttpRoute& route, std::string_view client,
                                                    const AuditPeer& peer) const {
  if (grants_.empty() || route.endpoint == Endpoint::kHealthz) return std::nullopt;
  auto found = grants_.find(client);
  if (found == grants_.end()) found = grants_.find("*");
  const std::string_view endpoint = kHttpEndpointLabels[static_cast<size_t>(route.endpoint)];
  const auto lists = [](const std::vector<std::string>& list, std::string_view name) {
    return std::find(list.begin(), list.end(), "*") != list.end() ||
           std::find(list.begin(), list.end(), name) != list.end();
  };
  std::string why;
  if (found == grants_.end()) {
    why = "no [[http.authorize]] entry names it (nor \"*\")";
  } else if (!lists(found->second.endpoints, endpoint)) {
    why = "its [[http.authorize]] entry does not list endpoint \"" + std::string(endpoint) + "\"";
  } else if ((route.endpoint == Endpoint::kId || route.endpoint == Endpoint::kIds) &&
             !lists(found->second.services, route.service)) {
    why = "its [[http.authorize]] entry does not list service \"" + route.service + "\"";
  } else {
    return std::nullopt;
  }
  audit_.Record(AuditEvent::kForbidden, [&](AuditLine& line) {
    line.Peer(peer)
        .Field("endpoint", endpoint)
        .Field("service", route.service)
        .Quoted("reason", why);
  });
  // The caller's own identity, so its operator can write the entry it needs.
  return ErrorReply(403, vocab::ErrorName(vocab::ErrorCode::kForbidden),
                    "this client (" + std::string(client) + ") may not use this: " + why +
                        "; ask this daemon's operator to authorize it");
}

HttpReply HttpHandlers::Handle(std::string_view method, std::string_view target,
                               std::string_view accept, std::string_view client,
                               const AuditPeer& peer, HttpEndpoint& endpoint) noexcept {
  try {
    return Route(method, target, accept, client, peer, endpoint);
  } catch (const std::exception& e) {
    return ErrorReply(500, vocab::ErrorName(vocab::ErrorCode::kSystemError), Scrubbed(e.what()));
  } catch (...) {
    return ErrorReply(500, vocab::ErrorName(vocab::ErrorCode::kSystemError), "");
  }
}

HttpReply HttpHandlers::Route(std::string_view method, std::string_view target,
                              std::string_view accept, std::string_view client,
                              const AuditPeer& peer, HttpEndpoint& endpoint) {
  auto route = RouteHttpRequest(method, target, accept);
  const Endpoint named = route ? route->endpoint : route.error().endpoint;
  if (admin_elsewhere_ && (named == Endpoint::kStatus || named == Endpoint::kMetrics)) {
    // Not served here at all (whatever the method or the caller): the admin listener has
    // them (http_admin_handlers.h).
    endpoint = Endpoint::kOther;
    return ErrorReply(404, vocab::ErrorName(vocab::ErrorCode::kNotFound),
                      "no such endpoint here: /v1/status and /metrics are served on this "
                      "daemon's admin listener ([http] admin_listen)");
  }
  if (!route) {
    endpoint = route.error().endpoint;
    if (admin_elsewhere_ && route.error().status == 404) {
      return ErrorReply(404, route.error().code,
                        "no such endpoint; use /v1/id, /v1/ids, /v1/decode, /v1/bounds or "
                        "/healthz (/v1/status and /metrics are on this daemon's admin listener)");
    }
    return ErrorReply(route.error().status, route.error().code, route.error().message);
  }
  endpoint = route->endpoint;
  if (auto refused = Unauthorized(*route, client, peer)) return std::move(*refused);
  switch (route->endpoint) {
    case Endpoint::kId:
    case Endpoint::kIds:
      return TakeIds(*route, client, peer);
    case Endpoint::kHealthz:
      return Healthz();
    case Endpoint::kStatus:
      return Status();
    case Endpoint::kMetrics:
      return MetricsReply(metrics_);
    // Arithmetic on the daemon's layout: no ID is taken, so neither bucket of the share is
    // asked (IdShare counts IDs handed out, and these hand out none).
    case Endpoint::kDecode:
      return DecodeReply(layout_, route->id);
    case Endpoint::kBounds:
      return BoundsReply(layout_, route->from_unix_ms, route->to_unix_ms);
    case Endpoint::kOther:
      break;
  }
  return ErrorReply(404, vocab::ErrorName(vocab::ErrorCode::kNotFound), "no such endpoint");
}

HttpReply HttpHandlers::TakeIds(const HttpRoute& route, std::string_view client,
                                const AuditPeer& peer) {
  // Before the take: a throttled request costs the ring nothing. The buckets fill on the
  // daemon's clock (the board's), as every interval the fronts measure.
  const auto now = board_.clock().SteadyNow();
  if (const IdShare::Admission admission = share_.Admit(client, route.count, now);
      admission.verdict != IdShare::Verdict::kAdmitted) {
    const bool front = admission.verdict == IdShare::Verdict::kFrontShare;
    (front ? metrics_.http().throttled_share : metrics_.http().throttled_client).Increment();
    audit_.Record(AuditEvent::kThrottled, [&](AuditLine& line) {
      line.Peer(peer)
          .Field("service", route.service)
          .Number("count", route.count)
          .Quoted("reason", front ? share_limit_ : client_limit_);
    });
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
  if (auto taken = services_.Take(route.service, ids); !taken) {
    TakeRefusal refusal = taken.error();
    refusal.message = Scrubbed(std::move(refusal.message));
    return RefusalReply(refusal);
  }

  HttpReply reply;
  protocol::IdsFormat format = route.endpoint == Endpoint::kIds ? protocol::IdsFormat::kJsonBatch
                                                                : protocol::IdsFormat::kJsonOne;
  if (route.plain) {
    reply.content_type = kTextContentType;
    format = protocol::IdsFormat::kText;
  }
  protocol::AppendIdsBody(ids, format, reply.body);
  return reply;
}

HttpReply HttpHandlers::Healthz() {
  HealthAnswer health = Health(runtime_dir_);
  ForRemoteCallers(health.body);
  return HealthzReply(health);
}

// The object `snowflakectl status --json` prints (docs/cli.md), less what remote callers
// are not shown.
HttpReply HttpHandlers::Status() {
  auto status = StatusAnswer(runtime_dir_, board_);
  if (status) {
    ForRemoteCallers(*status);
  } else {
    status.error().message = Scrubbed(std::move(status.error().message));
  }
  return StatusReply(status);
}

HttpReply HealthzReply(const HealthAnswer& health) {
  HttpReply reply;
  reply.status = health.serving ? 200 : 503;
  reply.retry_after_s = health.serving ? 0 : 1;
  reply.body = health.body.dump();
  return reply;
}

HttpReply StatusReply(const tl::expected<nlohmann::json, Error>& status) {
  if (!status) {
    // 503 whatever the cause, as /healthz: no status to give; the code says why.
    return ErrorReply(503, ClientErrorName(status.error().code), status.error().message);
  }
  HttpReply reply;
  reply.body = status->dump();
  return reply;
}

HttpReply MetricsReply(Metrics& metrics) {
  HttpReply reply;
  reply.content_type = kMetricsContentType;
  reply.body = metrics.Scrape();
  return reply;
}

}  // namespace snowflake::daemon
